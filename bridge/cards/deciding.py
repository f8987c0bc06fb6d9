"""Deciding a card: a person's decision claimed in memory at once, without awaiting anything (the first writer wins,
so two clicks racing on one card in this process cannot both win, and an adapter can answer within its platform's
ack), then durably (`Ending`). People who may not decide are refused privately and the card stays open; a card not
held here is left to the store and to the worker that holds it (`bridge.cards.forwarding`)."""

from __future__ import annotations

from dataclasses import replace

from bridge.cards.broker_tasks import BrokerTasks
from bridge.cards.card_updates import CardUpdates
from bridge.cards.decision_rules import Counted, approval_row, judge
from bridge.cards.ending import Ending
from bridge.cards.forwarding import Elsewhere, not_waited_here
from bridge.cards.held import Waiter
from bridge.cards.open_cards import OpenCards
from bridge.cards.recipients import base_id
from bridge.cards.store_roles import BrokerStore
from bridge.door.model import Actor, DecisionIn, DecisionResult, Verdict
from bridge.text.presentation import NO_LONGER_OPEN, STORE_FAILED, already_ended


class Deciding:
    def __init__(self, store: BrokerStore, cards: CardUpdates, held: OpenCards, ending: Ending, tasks: BrokerTasks,
                 elsewhere: Elsewhere | None) -> None:
        self._store = store
        self._cards = cards
        self._held = held
        self._ending = ending
        self._tasks = tasks
        self._elsewhere = elsewhere

    async def decide(self, decision: DecisionIn) -> DecisionResult:
        """Apply a person's decision: claimed in memory at once, then durably; anyone whose decision does not count
        is told why."""
        result, waiter = self._claim(decision)
        if result is None:
            result, conversation = await not_waited_here(self._store, self._elsewhere, decision)
            if result is None:
                return DecisionResult(Verdict.CLAIMED)
        else:
            copy = waiter.copy(decision.interaction_id) if waiter and waiter.copies else None
            conversation = (copy.interaction if copy else waiter.interaction).conversation if waiter else None
            if result.verdict is Verdict.CLAIMED and waiter is not None:
                result = await self._durable(waiter)
        if result.verdict not in (Verdict.CLAIMED, Verdict.COUNTED, Verdict.INVALID) and result.message \
                and conversation is not None:
            await self._cards.notify(conversation, decision.actor, result.message)
        return result

    async def decide_forwarded(self, decision: DecisionIn) -> DecisionResult | None:
        """A decision another worker received for a card waited on here (a legacy one): claimed as if it had come
        here, without notices (the receiving worker tells the person). None if the card is not waited on here."""
        result, waiter = self._claim(decision)
        if result is None or waiter is None:
            return None
        return await self._durable(waiter) if result.verdict is Verdict.CLAIMED else result

    def decide_nowait(self, decision: DecisionIn) -> DecisionResult:
        """Claim a decision in memory, without awaiting or any notice (for adapters that answer at once and show the
        verdict themselves). The durable claim follows; if it loses, the person is told as for a late click."""
        result, waiter = self._claim(decision)
        if result is None:
            return DecisionResult(Verdict.LATE, message=NO_LONGER_OPEN)
        if result.verdict is Verdict.CLAIMED and waiter is not None:
            waiter.answered_early = decision.actor  # the task waiting on it records it, and tells them if it lost
        return result

    async def _durable(self, waiter: Waiter) -> DecisionResult:
        """Wait for the claim this decision won in memory to be recorded."""
        claimed = waiter.outcome
        await waiter.wait_recorded()
        if waiter.final is None or any(claimed is tried for tried in waiter.unrecorded):
            return DecisionResult(Verdict.LATE, message=STORE_FAILED)
        if waiter.lost:
            return DecisionResult(Verdict.LATE, message=already_ended(waiter.final))
        return DecisionResult(Verdict.CLAIMED)

    def _claim(self, decision: DecisionIn) -> tuple[DecisionResult | None, Waiter | None]:
        """The in-memory claim; None when the interaction is not open in this process (the store knows more)."""
        waiter = self._held.waiters.get(base_id(decision.interaction_id))
        if waiter is None:
            return None, None
        if waiter.outcome is not None:
            return DecisionResult(Verdict.LATE, message=already_ended(waiter.final or waiter.outcome)), waiter
        judged = judge(waiter.interaction, decision)
        if isinstance(judged, DecisionResult):
            return judged, waiter
        if isinstance(judged, Counted):
            # One approval of several: its own audit row and the cards updated, by the waiting task.
            waiter.interaction = replace(waiter.interaction, approvals=judged.approvals)
            waiter.approvals.append(approval_row(waiter.interaction, decision.actor, judged.approvals))
            waiter.woken()
            if waiter.parked is not None:
                self._tasks.start(self._ending.show_progress, waiter)  # nobody waits on a parked card: shown now
            return DecisionResult(Verdict.COUNTED), waiter
        self._ending.settle(waiter, judged)
        return DecisionResult(Verdict.CLAIMED), waiter

    async def check(self, interaction_id: str, actor: Actor) -> DecisionResult:
        """Whether `actor` could decide now, without deciding (before opening a dialog, say). Refusals and late
        clicks get the usual notice."""
        waiter = self._held.waiters.get(base_id(interaction_id))
        if waiter is not None:
            if waiter.outcome is None and waiter.interaction.may_decide(actor):
                return DecisionResult(Verdict.CLAIMED)
            return await self.decide(DecisionIn(interaction_id, actor, "cancel"))  # refused or late: changes nothing
        stored = await self._store.interaction(base_id(interaction_id))
        if stored is not None and stored.outcome is None and self._elsewhere is not None:
            # Open on another worker: never decide here (a cancel would count).
            if stored.interaction.may_decide(actor):
                return DecisionResult(Verdict.CLAIMED)
            result = judge(stored.interaction, DecisionIn(interaction_id, actor, "cancel"))
            assert isinstance(result, DecisionResult)  # refused: they may not decide
            await self._cards.notify(stored.interaction.conversation, actor, result.message)
            return result
        return await self.decide(DecisionIn(interaction_id, actor, "cancel"))  # unknown, ended or being restored

    async def cancel(self, interaction_id: str, actor: Actor) -> DecisionResult:
        """The `cancel` command: same rules as a Cancel button."""
        return await self.decide(DecisionIn(interaction_id, actor, "cancel"))
