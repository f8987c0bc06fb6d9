"""How a card held here ends: its outcome claimed in memory (`settle`, the first writer wins), then durably (`end`,
`AsyncStore.claim` or `claim_parked`), then, without holding up the answer, its card brought to that final state
and marked shown (`show_end`). A claim the store refuses is undone in memory (`unrecorded`): the card opens again. A
parked card's end runs in a task of the broker's own (`BrokerTasks`), which hands the outcome on to the calls layer
(`ParkedEnded`); its deadline is kept here too, in the broker's one timer (`Deadlines`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

import anyio

from bridge.cards.broker_tasks import BrokerTasks
from bridge.cards.card_updates import CardUpdates
from bridge.cards.deadlines import Deadlines
from bridge.cards.decision_rules import end_detail
from bridge.cards.held import ParkedEnded, Waiter
from bridge.cards.open_cards import OpenCards
from bridge.cards.secret_answers import for_the_record
from bridge.cards.store_roles import BrokerStore
from bridge.door.model import Outcome, Status
from bridge.door.ports import CLEANUP_TIMEOUT
from bridge.errors import StoreError
from bridge.observe import hooks as observe
from bridge.storage import StoredInteraction
from bridge.storage.watch import DecisionWatch
from bridge.text.presentation import STORE_FAILED, already_ended, describe_status

logger = logging.getLogger(__name__)

STORE_RETRY = (1.0, 30.0)
"""Seconds before trying again to record an expiry the store refused: the first wait, and the longest (doubling)."""


def same_record(a: Outcome, b: Outcome) -> bool:
    """Whether two outcomes are the same decision as the store keeps it (content read back from JSON)."""
    return (a.status, a.by, a.reason, dict(a.content or {})) == (b.status, b.by, b.reason, dict(b.content or {}))


class Ending:
    def __init__(self, store: BrokerStore, cards: CardUpdates, held: OpenCards, tasks: BrokerTasks,
                 watch: DecisionWatch | None) -> None:
        self._store = store
        self._cards = cards
        self._held = held
        self._tasks = tasks
        self._watch = watch
        self.deadlines = Deadlines(self._expire_parked)

    def _expire_parked(self, interaction_id: str) -> None:
        waiter = self._held.waiters.get(interaction_id)
        if waiter is not None and waiter.parked is not None and waiter.outcome is None:
            self.settle(waiter, Outcome(Status.EXPIRED, reason="nobody answered in time"))

    async def _after_parked(self, waiter: Waiter) -> None:
        """A parked interaction's outcome was claimed in memory: make the claim durable (the decision's one synced
        commit), then hand it on (its call may continue) and finish its cards."""
        interaction = waiter.interaction
        assert waiter.parked is not None and waiter.outcome is not None
        expired = waiter.outcome.status is Status.EXPIRED
        try:
            final = await self.end(waiter, waiter.outcome)
        except StoreError as exc:
            await self.unrecorded(waiter, exc)
            if expired:  # its timer fired once: it is due again a little later
                self.deadlines.add(interaction.id, time.time() + STORE_RETRY[0])
            return
        self._held.waiters.pop(interaction.id, None)
        if self._watch is not None:
            self._watch.unfollow(interaction.id)
        # Durable: the call may continue now; its cards are brought to their final state after, in this same task.
        self._tasks.hand_on(ParkedEnded(*waiter.parked, final, waiter.last, interaction))
        try:
            await self.show_end(waiter, final)
        except Exception:
            # The top of a broker task: one card failing after its decision must not stop every card.
            logger.exception("showing the end of interaction %s failed", interaction.id)

    async def show_end(self, waiter: Waiter, final: Outcome) -> None:
        """Once its end is durable, what the card shows: its final state (and its private copies'), or, if the end
        came from elsewhere after this worker answered someone at once, a notice to them that it came too late."""
        if waiter.posting is not None:
            # Its private copies are still being posted: they end with the card (bounded: also at shutdown).
            with anyio.move_on_after(CLEANUP_TIMEOUT, shield=True):
                await waiter.posting.wait()
        if waiter.lost:
            if waiter.answered_early is not None:
                await self._cards.notify(waiter.interaction.conversation, waiter.answered_early,
                                         already_ended(final))
        else:
            # Whoever's claim won finishes the card: this worker, or the one that decided or expired it.
            await self.finish_card(waiter, final)

    async def show_progress(self, waiter: Waiter) -> None:
        """An approval counted on a parked card (nobody waits on it): record it and show it now."""
        await self.record_approvals(waiter)
        await self._cards.progress(waiter.interaction, waiter.card, waiter.copies)

    async def record_approvals(self, waiter: Waiter) -> None:
        rows, waiter.approvals = waiter.approvals, []
        with anyio.CancelScope(shield=True):
            for done, row in enumerate(rows):
                try:
                    await self._store.record(row)
                except StoreError:
                    waiter.approvals[:0] = rows[done:]  # not lost: written on the next try
                    raise

    def settle(self, waiter: Waiter, outcome: Outcome) -> bool:
        """Claim in memory; the first writer wins. Whoever waits on the interaction records it (`end`)."""
        if waiter.outcome is not None:
            return False
        if not outcome.approvals and waiter.interaction.approvals:
            outcome = replace(outcome, approvals=waiter.interaction.approvals)  # an end nobody chose: who approved
        waiter.outcome = outcome
        waiter.woken()
        if waiter.parked is not None:
            self._tasks.start(self._after_parked, waiter)
        return True

    async def end(self, waiter: Waiter, outcome: Outcome) -> Outcome:
        """Settle `outcome` unless something was claimed first, and make the claim durable. The result is what the
        store holds: another worker's outcome if its claim came first."""
        self.settle(waiter, outcome)
        if waiter.recorded and waiter.final is not None:
            return waiter.final
        claimed = waiter.outcome
        assert claimed is not None
        interaction = waiter.interaction
        with anyio.CancelScope(shield=True):
            try:
                if waiter.approvals:  # counted before the end: their rows come first in the log
                    await self.record_approvals(waiter)
                try:
                    won = await self._claim_durably(waiter, claimed)
                except StoreError:
                    waiter.unrecorded.append(claimed)
                    raise
                if won:
                    waiter.final = claimed
                    observe.interaction_ended(interaction, claimed)
                else:
                    stored = await self._store.interaction(interaction.id)
                    waiter.final = stored.outcome if stored and stored.outcome else claimed
                    # A claim that raised may still have committed (a connection dropped after the commit): then
                    # the stored outcome is that earlier try of ours, and it is what the server gets.
                    earlier = next((tried for tried in waiter.unrecorded
                                    if same_record(for_the_record(interaction, tried), waiter.final)), None)
                    if earlier is not None and waiter.parked is None:
                        waiter.final = earlier
                        observe.interaction_ended(interaction, earlier)
                    else:
                        waiter.lost = True
                        logger.info("interaction %s was already %s elsewhere", interaction.id,
                                    describe_status(waiter.final))
            finally:
                waiter.mark_recorded()
        assert waiter.final is not None  # set unless the claim raised
        return waiter.final

    async def _claim_durably(self, waiter: Waiter, claimed: Outcome) -> bool:
        interaction = waiter.interaction
        record, detail = for_the_record(interaction, claimed), end_detail(interaction, claimed)
        pending_call = waiter.parked[0] if waiter.parked is not None else waiter.round_of
        if pending_call is None:
            return await self._store.claim(interaction, record, detail)
        # A card of a stored round, parked or waited on: the claim of its last card takes the round's sending too, so
        # the call that waits sends it with no second synced commit (`AsyncStore.send_round`).
        won, waiter.last = await self._store.claim_parked(interaction, record, detail, pending_call)
        return won

    async def unrecorded(self, waiter: Waiter, exc: StoreError) -> None:
        """The store refused the claim: open the card again (in memory too), so the same click counts once the store
        works. Whoever decided is told (`Deciding`, or here for a claim answered at once)."""
        logger.warning("could not record the end of interaction %s, it stays open: %s", waiter.interaction.id, exc)
        early, waiter.answered_early = waiter.answered_early, None
        waiter.outcome = None
        waiter.reopen()
        if early is not None:
            await self._cards.notify(waiter.interaction.conversation, early, STORE_FAILED)

    async def finish_stored(self, stored: StoredInteraction, outcome: Outcome) -> None:
        await self.finish_card(Waiter(stored.interaction, durable=False, card=stored.card), outcome)

    async def finish_card(self, waiter: Waiter, outcome: Outcome) -> None:
        # Marked once shown: a worker that dies before this leaves the card to whoever takes its work over.
        if await self._cards.finish(waiter.interaction, waiter.card, waiter.copies, outcome) \
                and waiter.card is not None:
            with anyio.CancelScope(shield=True):
                await self._store.mark_shown(waiter.interaction.id)

    # -- ends from outside (the server, the call) ----------------------------------------------------------------

    def complete(self, interaction_id: str, reason: str) -> bool:
        """Accept an open URL interaction because the server reports its flow done. False if it is not open."""
        waiter = self._held.waiters.get(interaction_id)
        if waiter is None or waiter.outcome is not None:
            return False
        self.settle(waiter, Outcome(Status.ACCEPTED, reason=reason))
        return True

    def fail(self, interaction_id: str, reason: str) -> None:
        """End an interaction because the request behind it is gone (the server crashed, the call ended)."""
        waiter = self._held.waiters.get(interaction_id)
        if waiter is not None:
            self.settle(waiter, Outcome(Status.FAILED, reason=reason))

    def withdraw(self, interaction_id: str, reason: str) -> None:
        """End an open interaction as cancelled because its call was stopped or ended without it."""
        if (waiter := self._held.waiters.get(interaction_id)) is not None:
            self.settle(waiter, Outcome(Status.CANCELLED, reason=reason))
