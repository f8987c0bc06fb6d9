"""The broker: posts interaction cards, waits for a person, and turns the first valid decision into an outcome.

It is the only owner of interaction deadlines (anyio cancel scopes). A decision is claimed in two steps: first in
memory, without awaiting anything (the first writer wins, so two clicks racing on one card in this process cannot
both win, and an adapter can answer within its platform's ack), then durably with `AsyncStore.claim`, one atomic
statement that also settles races with other workers and expiry. A card shows a decision as final only once that
claim has returned: if it lost, the stored outcome (another worker's) is what counts and the decision is late.
A claim the store refuses (a full disk, an unreachable database) is undone in memory too: nothing reaches the
server, the person is told, the card stays open and its wait goes on, so the same click counts once the store works
(an expiry the store refuses is tried again a little later). People who may not decide are refused privately and the
card stays open. Whatever happens (a decision, expiry, the
request being withdrawn, shutdown) the card is brought to a final state in a shielded scope and the outcome is
written to the audit log, except for durable (2026-era) interactions at shutdown: those stay open in the store and
are answered after a restart. The final update comes after the outcome is answered, off the server's path
(`final_updates`; a parked card's in its own broker task, after the hand-on). Once the card shows its final state the
store is told (`mark_shown`): a worker that dies between the claim and the chat edit leaves the card to whoever takes
its work over (`Reaped.decided`).

Cards that need several approvers (`Interaction.required`) count each person's approval once, as its own audit row,
and show the progress on every copy of the card; one decline or cancel by an approver ends them
(`bridge.cards.decision_rules`). Who may decide and who is asked privately is `bridge.cards.recipients`'s; the broker
posts those private copies and finishes them with the card.

A durable interaction may also be *parked* (`ask(..., park=True)`): its card (and copies) posted, `ask` raises
`Parked`, and no task waits for it. The broker's one timer (`bridge.cards.deadlines`) keeps its deadline, and on a
shared store the one `DecisionWatch` of this worker tells it (by id, without a task per card) of a claim made elsewhere.
Once its decision is claimed in memory, a task of the broker's own (`run`) makes the claim durable first
(`AsyncStore.claim_parked`), then hands the outcome on (`ParkedEnded`, over the `handoff` stream the calls layer
reads in its own tasks: it continues the call, if the store says this claim answered the round's last card) and
finishes its cards. A claim made here that answered the last card of a round not parked here is handed on too
(`RoundClaimed`): the call is this worker's to continue.

The broker is a façade over one part per lifecycle, wired in its constructor: the cards held here
(`bridge.cards.open_cards`), asking and waiting (`asking`), deciding (`deciding`), how a card ends (`ending`),
parked cards (`parked`), taking over stored cards (`takeover`), the broker's own tasks and the hand-off
(`broker_tasks`), and hearing other workers (`forwarding`).
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectSendStream

from bridge.cards.asking import Asking
from bridge.cards.broker_tasks import BrokerTasks
from bridge.cards.card_updates import CardUpdates
from bridge.cards.deciding import Deciding
from bridge.cards.ending import Ending
from bridge.cards.final_updates import WORKERS, FinalUpdates
from bridge.cards.forwarding import Elsewhere
from bridge.cards.held import Handoff
from bridge.cards.open_cards import OpenCards
from bridge.cards.parked import ParkedCards
from bridge.cards.recipients import Routing
from bridge.cards.store_roles import BrokerStore
from bridge.cards.takeover import Takeover
from bridge.door.model import (
    Actor,
    CardRef,
    ConversationKey,
    DecisionIn,
    DecisionResult,
    Interaction,
    Status,
)
from bridge.door.ports import ChatPort
from bridge.storage import StoredInteraction
from bridge.storage.watch import DecisionWatch


class Broker:
    """Posts cards through the chat port of each conversation's platform and collects decisions."""

    def __init__(self, store: BrokerStore, port_for: Callable[[ConversationKey], ChatPort],
                 routing: Routing | None = None, watch: DecisionWatch | None = None) -> None:
        """`watch`: on a store shared by several workers, how this one hears decisions the others claim (whoever
        runs the bridge runs the watch)."""
        cards = CardUpdates(port_for)
        self._held = OpenCards()
        self._tasks = BrokerTasks()
        self._ending = Ending(store, cards, self._held, self._tasks, watch)
        self._parked = ParkedCards(store, port_for, self._held, self._ending, self._tasks, watch)
        self._finals = FinalUpdates(self._ending.show_end)
        self._asking = Asking(store, port_for, cards, routing, watch, self._held, self._ending, self._parked,
                              self._finals)
        self._takeover = Takeover(self._held, self._ending, self._tasks)
        elsewhere = Elsewhere(store, watch, self._ending.finish_stored, self._tasks.continue_elsewhere) \
            if watch is not None else None
        self._deciding = Deciding(store, cards, self._held, self._ending, self._tasks, elsewhere)
        # The two entries of every decision are the parts' own methods, not methods here that forward to them: an
        # `await` through a forwarding method is two calls more each way, every request and every click.
        self.ask = self._asking.ask
        self.decide = self._deciding.decide

    async def run(self, handoff: MemoryObjectSendStream[Handoff] | None = None, *,
                  task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Keep the deadlines of parked interactions and run what follows their decisions, until cancelled.
        `handoff`: where ended parked cards go (`handoff_stream`), to the calls layer that continues their calls
        (the stream is its runner's to close)."""
        async with self._tasks.running(handoff):
            for _ in range(WORKERS):
                await self._tasks.keep(self._finals.run)
            task_status.started()
            await self._ending.deadlines.run()

    async def stop_handing_on(self) -> None:
        """Shutdown: hand on the decisions being recorded now, then let the cards' final updates asked for so far
        be done while the chat adapters still serve."""
        await self._tasks.stop_handing_on()
        await self._finals.settled()

    # -- asking --------------------------------------------------------------------------------------------------

    async def repark(self, interaction: Interaction, card: CardRef | None, pending_call: str, input_key: str) -> None:
        await self._parked.repark(interaction, card, pending_call, input_key)

    def drop_parked(self, interaction_id: str) -> None:
        self._parked.drop_parked(interaction_id)

    # -- stored cards --------------------------------------------------------------------------------------------

    async def retire(self, stored: StoredInteraction, reason: str, status: Status = Status.CANCELLED, *,
                     continuing: bool = False) -> bool:
        return await self._takeover.retire(stored, reason, status, continuing=continuing)

    async def expire(self, stored: StoredInteraction) -> bool:
        return await self._takeover.expire(stored)

    async def show_final(self, stored: StoredInteraction) -> None:
        await self._takeover.show_final(stored)

    # -- deciding ------------------------------------------------------------------------------------------------

    async def decide_forwarded(self, decision: DecisionIn) -> DecisionResult | None:
        return await self._deciding.decide_forwarded(decision)

    def decide_nowait(self, decision: DecisionIn) -> DecisionResult:
        return self._deciding.decide_nowait(decision)

    async def check(self, interaction_id: str, actor: Actor) -> DecisionResult:
        return await self._deciding.check(interaction_id, actor)

    async def cancel(self, interaction_id: str, actor: Actor) -> DecisionResult:
        return await self._deciding.cancel(interaction_id, actor)

    # -- ends from outside ---------------------------------------------------------------------------------------

    def complete(self, interaction_id: str, reason: str) -> bool:
        return self._ending.complete(interaction_id, reason)

    def fail(self, interaction_id: str, reason: str) -> None:
        self._ending.fail(interaction_id, reason)

    def withdraw(self, interaction_id: str, reason: str) -> None:
        self._ending.withdraw(interaction_id, reason)

    # -- introspection -------------------------------------------------------------------------------------------

    def open_interactions(self, conversation: ConversationKey | None = None) -> list[Interaction]:
        return self._held.open_interactions(conversation)

    def waiting_for(self, actor: Actor) -> list[tuple[Interaction, CardRef | None]]:
        return self._held.waiting_for(actor)

    async def wait_open(self, interaction_id: str) -> Interaction:
        return await self._held.wait_open(interaction_id)

    def waiting(self, interaction_id: str) -> bool:
        return self._held.waiting(interaction_id)

    def card_of(self, interaction_id: str) -> CardRef | None:
        return self._held.card_of(interaction_id)

    def interaction(self, interaction_id: str) -> Interaction | None:
        return self._held.interaction(interaction_id)

    def statistics(self) -> dict[str, int]:
        return self._held.statistics()

    @property
    def closing(self) -> bool:
        return self._held.closing

    def close(self) -> None:
        self._held.close()
