"""Taking over stored cards: an interaction left open by an earlier run (or a worker that died) that nobody will wait
on again is ended and its card finished (`retire`), one past its deadline is expired (`expire`), and a decided card
whose worker died before showing it is brought to its final state (`show_final`)."""

from __future__ import annotations

from bridge.cards.broker_tasks import BrokerTasks
from bridge.cards.ending import Ending
from bridge.cards.held import Waiter
from bridge.cards.open_cards import OpenCards
from bridge.door.model import Outcome, Status
from bridge.storage import StoredInteraction


class Takeover:
    def __init__(self, held: OpenCards, ending: Ending, tasks: BrokerTasks) -> None:
        self._held = held
        self._ending = ending
        self._tasks = tasks

    async def retire(self, stored: StoredInteraction, reason: str, status: Status = Status.CANCELLED, *,
                     continuing: bool = False) -> bool:
        """End an interaction left open by an earlier run (or a worker that died) that nobody will wait on again:
        record it as `status` and bring its card (if it was posted) to that final state, so nothing dangles in chat.
        False if it had ended meanwhile (then whoever ended it finished the card). `continuing`: a parked card's end
        is an answer, and if it was its round's last, the call continues here."""
        waiter = Waiter(stored.interaction, durable=False, card=stored.card)
        if stored.parked and stored.pending_call is not None and stored.input_key is not None:
            waiter.parked = (stored.pending_call, stored.input_key)  # not `park`ed: nothing here follows it
        waiter.outcome = Outcome(status, reason=reason)
        await self._ending.end(waiter, waiter.outcome)
        if continuing and waiter.last and waiter.parked is not None:
            await self._tasks.continue_elsewhere(waiter.parked[0])  # it answered the last card of a parked round
        if not waiter.lost:  # durable, and its call may go on: the card shows it after
            await self._ending.finish_card(waiter, waiter.final or Outcome(status, reason=reason))
        return not waiter.lost

    async def expire(self, stored: StoredInteraction) -> bool:
        """Expire an interaction past its deadline (leased to this worker by the store): the waiter here, if any,
        ends it as usual; otherwise it is claimed here and its card finished. False if it had ended already."""
        outcome = Outcome(Status.EXPIRED, reason="nobody answered in time")
        waiter = self._held.waiters.get(stored.interaction.id)
        if waiter is not None:
            return self._ending.settle(waiter, outcome)
        return await self.retire(stored, outcome.reason, Status.EXPIRED, continuing=True)

    async def show_final(self, stored: StoredInteraction) -> None:
        """Bring a decided card to its final state again (its worker may have died before it could)."""
        if stored.outcome is not None:
            await self._ending.finish_stored(stored, stored.outcome)
