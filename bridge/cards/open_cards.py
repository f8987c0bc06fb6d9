"""The cards the broker holds in this process (`Waiter` by interaction id), and what can be read off them: which are
open, for whom, and waiting until one opens. Also whether the broker is shutting down, which changes how a card ends.
"""

from __future__ import annotations

import anyio

from bridge.cards.card_updates import as_copy
from bridge.cards.held import Waiter
from bridge.cards.recipients import base_id
from bridge.door.model import Actor, CardRef, ConversationKey, Interaction


class OpenCards:
    def __init__(self) -> None:
        self.waiters: dict[str, Waiter] = {}
        self._closing = False
        self._registered: anyio.Event | None = None  # made by `wait_open`, set by `opened`

    def opened(self) -> None:
        # Made by whoever waits (`wait_open`, tests and the door's callers): most cards open with nobody waiting.
        if self._registered is not None:
            self._registered.set()
            self._registered = None

    def open_interactions(self, conversation: ConversationKey | None = None) -> list[Interaction]:
        return [w.interaction for w in self.waiters.values()
                if w.outcome is None and (conversation is None or w.interaction.conversation == conversation)]

    def waiting_for(self, actor: Actor) -> list[tuple[Interaction, CardRef | None]]:
        """Open interactions that wait for this person by name (for a home screen listing what needs them).

        Requests anyone in a conversation may answer are left out: a list outside that conversation would show
        them to people who cannot see it.
        """
        return [(w.interaction, w.card) for w in self.waiters.values()
                if w.outcome is None and actor.key in w.interaction.approvers]

    async def wait_open(self, interaction_id: str) -> Interaction:
        """Wait until an interaction is open here (posted, or resumed after a restart)."""
        while (waiter := self.waiters.get(base_id(interaction_id))) is None or waiter.outcome is not None:
            if self._registered is None:
                self._registered = anyio.Event()
            await self._registered.wait()
        return waiter.interaction

    def waiting(self, interaction_id: str) -> bool:
        """Whether the interaction (or the private copy a card id names) is waited on here and has no answer yet."""
        waiter = self.waiters.get(base_id(interaction_id))
        return waiter is not None and waiter.outcome is None

    def card_of(self, interaction_id: str) -> CardRef | None:
        waiter = self.waiters.get(base_id(interaction_id))
        copy = waiter.copy(interaction_id) if waiter else None
        return copy.card if copy else (waiter.card if waiter else None)

    def interaction(self, interaction_id: str) -> Interaction | None:
        """The open interaction, or the private copy a card id names."""
        waiter = self.waiters.get(base_id(interaction_id))
        copy = waiter.copy(interaction_id) if waiter else None
        return as_copy(waiter.interaction, copy) if waiter and copy else (waiter.interaction if waiter else None)

    def statistics(self) -> dict[str, int]:
        return {"open": sum(1 for w in self.waiters.values() if w.outcome is None),
                "parked": sum(1 for w in self.waiters.values() if w.outcome is None and w.parked is not None)}

    @property
    def closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        """Mark the broker as shutting down: what is cancelled from now on ends as 'shut down', or stays open
        (durable interactions)."""
        self._closing = True
