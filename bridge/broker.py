"""The broker: posts interaction cards, waits for a person, and turns the first valid decision into an outcome.

It is the only owner of interaction deadlines (anyio cancel scopes). A decision is claimed without awaiting anything
first, so two clicks racing on one card cannot both win: the second finds the interaction decided and gets a notice.
People who may not decide are refused privately and the card stays open. Whatever happens (a decision, expiry, the
request being withdrawn, shutdown) the card is brought to a final state in a shielded scope and the outcome is
written to the audit log, except for durable (2026-era) interactions at shutdown: those stay open in the store and
are answered after a restart.

A durable interaction may also be *parked* (`ask(..., park=True)`): its card is posted and `ask` raises `Parked` at
once, so no task waits for it. Its deadline is kept by the broker's one timer (`bridge.deadlines`); when it is
decided, expires or is withdrawn, the broker finishes its card and hands the outcome to `on_parked` (the tool-call
owner continues the call) in a task of its own task group (`run`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio
from anyio.abc import TaskGroup, TaskStatus

from bridge.deadlines import Deadlines
from bridge.errors import AdapterError
from bridge.model import (
    Actor,
    CardRef,
    ConversationKey,
    DecisionIn,
    DecisionResult,
    Interaction,
    JSONValue,
    Outcome,
    Status,
    Verdict,
)
from bridge.ports import CLEANUP_TIMEOUT, ChatPort
from bridge.presentation import describe_status
from bridge.store import Store, StoredInteraction

logger = logging.getLogger(__name__)

ParkedHandler = Callable[[str, str, Outcome], Awaitable[None]]
"""Called with (pending call id, input key, outcome) once a parked interaction has ended and its card is final."""


class Parked(Exception):
    """Raised by `Broker.ask(..., park=True)` once the card is posted: the answer arrives through `on_parked`."""

    def __init__(self, interaction_id: str) -> None:
        super().__init__(interaction_id)
        self.interaction_id = interaction_id


@dataclass(slots=True)
class _Waiter:
    interaction: Interaction
    durable: bool
    card: CardRef | None = None
    outcome: Outcome | None = None
    done: anyio.Event | None = None
    """Set when decided; only a waiter with a task waiting on it has one."""
    parked: tuple[str, str] | None = None
    """(pending call id, input key) of a parked interaction: nobody waits, `on_parked` gets the outcome."""


class Broker:
    """Posts cards through the chat port of each conversation's platform and collects decisions."""

    def __init__(self, store: Store, port_for: Callable[[ConversationKey], ChatPort]) -> None:
        self._store = store
        self._port_for = port_for
        self._waiters: dict[str, _Waiter] = {}
        self._closing = False
        self._registered: anyio.Event | None = None
        """Set when an interaction opens (posted, parked or resumed); only made while someone waits for one."""
        self._deadlines = Deadlines(self._expire_parked)
        self._tg: TaskGroup | None = None
        self.on_parked: ParkedHandler | None = None
        """Who continues a call when one of its parked interactions ends (set by the tool-call owner)."""

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Keep the deadlines of parked interactions and run what follows their decisions, until cancelled."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            task_status.started()
            try:
                await self._deadlines.run()
            finally:
                self._tg = None

    # -- asking --------------------------------------------------------------------------------------------------

    async def ask(self, interaction: Interaction, *, pending_call: str | None = None,
                  input_key: str | None = None, park: bool = False) -> Outcome:
        """Post `interaction` and wait for its outcome. Durable interactions (part of a stored 2026 call) survive
        shutdown; the rest are cancelled by it. With `park` (durable ones only), raise `Parked` once the card is
        posted instead of waiting."""
        self._store.save_interaction(interaction, pending_call=pending_call, input_key=input_key)
        waiter = _Waiter(interaction, durable=pending_call is not None)
        if not park:
            waiter.done = anyio.Event()
        self._waiters[interaction.id] = waiter
        try:
            waiter.card = await self._port_for(interaction.conversation).post_card(interaction)
        except AdapterError as exc:
            logger.warning("could not post card %s: %s", interaction.id, exc)
            self._waiters.pop(interaction.id, None)
            return self._settle(waiter, Outcome(Status.FAILED, reason=f"the card could not be posted: {exc}"))
        except BaseException:
            # Cancelled (or broken) while posting: the interaction ends here, never half-open.
            self._waiters.pop(interaction.id, None)
            if not (self._closing and waiter.durable):
                self._settle(waiter, Outcome(Status.CANCELLED, reason="the request was withdrawn"))
            raise
        self._store.set_card(interaction.id, waiter.card)
        if park and pending_call is not None and input_key is not None and waiter.outcome is None:
            self._park(waiter, pending_call, input_key)
            raise Parked(interaction.id)
        if waiter.done is None:
            waiter.done = anyio.Event()
            if waiter.outcome is not None:
                waiter.done.set()
        return await self._wait(waiter)

    async def repark(self, interaction: Interaction, card: CardRef | None, pending_call: str, input_key: str) -> None:
        """Take up again, parked, an interaction whose card was posted before a restart (posting it if it was not)."""
        waiter = _Waiter(interaction, durable=True, card=card)
        self._waiters[interaction.id] = waiter
        if card is None:
            try:
                waiter.card = await self._port_for(interaction.conversation).post_card(interaction)
                self._store.set_card(interaction.id, waiter.card)
            except AdapterError as exc:
                logger.warning("could not re-post card %s: %s", interaction.id, exc)
        if waiter.outcome is None:
            self._park(waiter, pending_call, input_key)

    def _park(self, waiter: _Waiter, pending_call: str, input_key: str) -> None:
        waiter.parked = (pending_call, input_key)
        self._deadlines.add(waiter.interaction.id, waiter.interaction.expires_at)
        self._opened()

    def _opened(self) -> None:
        if self._registered is not None:
            self._registered.set()
            self._registered = None

    def _expire_parked(self, interaction_id: str) -> None:
        waiter = self._waiters.get(interaction_id)
        if waiter is not None and waiter.parked is not None and waiter.outcome is None:
            self._settle(waiter, Outcome(Status.EXPIRED, reason="nobody answered in time"))

    async def _after_parked(self, waiter: _Waiter, outcome: Outcome) -> None:
        try:
            await self._finish_card(waiter, outcome)
            assert waiter.parked is not None
            if self.on_parked is not None:
                await self.on_parked(*waiter.parked, outcome)
        except Exception:
            # The top of a broker task: one call failing after its decision must not stop every card.
            logger.exception("continuing after interaction %s failed", waiter.interaction.id)

    async def retire(self, stored: StoredInteraction, reason: str) -> None:
        """End an interaction left open by an earlier run that nobody will wait on again: record it as cancelled
        and bring its card (if it was posted) to that final state, so nothing dangles in chat."""
        outcome = Outcome(Status.CANCELLED, reason=reason)
        self._store.finish_interaction(stored.interaction, outcome)
        await self._finish_card(_Waiter(stored.interaction, durable=False, card=stored.card), outcome)

    async def _wait(self, waiter: _Waiter) -> Outcome:
        interaction = waiter.interaction
        self._opened()
        outcome: Outcome | None = None
        try:
            assert waiter.done is not None
            with anyio.move_on_after(max(0.0, interaction.expires_at - time.time())):
                await waiter.done.wait()
            outcome = waiter.outcome
            if outcome is None:
                outcome = self._settle(waiter, Outcome(Status.EXPIRED, reason="nobody answered in time"))
            return outcome
        finally:
            self._waiters.pop(interaction.id, None)
            if outcome is None:
                # Cancelled from outside: the request was withdrawn, the call stopped, or the bridge is stopping.
                if self._closing and waiter.durable:
                    logger.info("leaving durable interaction %s open for after the restart", interaction.id)
                else:
                    reason = "the bridge is shutting down" if self._closing else "the request was withdrawn"
                    outcome = self._settle(waiter, Outcome(Status.CANCELLED, reason=reason))
            if outcome is not None:
                await self._finish_card(waiter, outcome)

    def _settle(self, waiter: _Waiter, outcome: Outcome) -> Outcome:
        """Record an outcome exactly once; the first writer wins."""
        if waiter.outcome is None:
            waiter.outcome = outcome
            self._store.finish_interaction(waiter.interaction, outcome)
            if waiter.done is not None:
                waiter.done.set()
            if waiter.parked is not None:
                self._waiters.pop(waiter.interaction.id, None)
                if self._tg is None:
                    logger.warning("parked interaction %s ended while the broker is not running",
                                   waiter.interaction.id)
                else:
                    self._tg.start_soon(self._after_parked, waiter, outcome)
        return waiter.outcome

    async def _finish_card(self, waiter: _Waiter, outcome: Outcome) -> None:
        if waiter.card is None:
            return
        with anyio.move_on_after(CLEANUP_TIMEOUT, shield=True):
            try:
                await self._port_for(waiter.interaction.conversation).finish_card(waiter.card, waiter.interaction,
                                                                                   outcome)
            except AdapterError as exc:
                logger.warning("could not finish card %s: %s", waiter.interaction.id, exc)

    # -- deciding ------------------------------------------------------------------------------------------------

    async def decide(self, decision: DecisionIn) -> DecisionResult:
        """Apply a person's decision. Claims synchronously, then tells the person anything they need to know."""
        result, waiter = self._claim(decision)
        if result.verdict is not Verdict.CLAIMED and result.verdict is not Verdict.INVALID and result.message:
            conversation = waiter.interaction.conversation if waiter else None
            stored = None if waiter else self._store.interaction(decision.interaction_id)
            if stored is not None:
                conversation = stored.interaction.conversation
            if conversation is not None:
                try:
                    await self._port_for(conversation).notify(conversation, decision.actor, result.message)
                except AdapterError as exc:
                    logger.warning("could not send a notice: %s", exc)
        return result

    def decide_nowait(self, decision: DecisionIn) -> DecisionResult:
        """Claim a decision without sending any notice (for adapters that show the verdict themselves)."""
        return self._claim(decision)[0]

    def _claim(self, decision: DecisionIn) -> tuple[DecisionResult, _Waiter | None]:
        waiter = self._waiters.get(decision.interaction_id)
        if waiter is None or waiter.outcome is not None:
            stored = self._store.interaction(decision.interaction_id)
            if stored is None:
                return DecisionResult(Verdict.UNKNOWN, message="That request is not known here."), waiter
            outcome = waiter.outcome if waiter and waiter.outcome else stored.outcome
            if outcome is None:
                # Open in the store but nobody waits on it yet (a restart is still resuming it).
                restoring = "That request is being restored; try again in a moment."
                return DecisionResult(Verdict.LATE, message=restoring), waiter
            return DecisionResult(Verdict.LATE, message=f"That request was already {describe_status(outcome)}."), waiter
        interaction = waiter.interaction
        if not interaction.may_decide(decision.actor):
            who = interaction.requester.label() if interaction.requester else "the approvers"
            return DecisionResult(Verdict.REFUSED, message=f"Only {who} can answer this request."), waiter
        content: dict[str, JSONValue] | None = None
        if decision.action == "accept" and not interaction.form.empty:
            given = decision.content
            if given is None and interaction.quick_accept:
                given = interaction.form.defaults()
            content, errors = interaction.form.validate(given or {})
            if errors:
                return DecisionResult(Verdict.INVALID, errors=errors.fields,
                                      message=errors.summary() or "the answer is not valid"), waiter
        status = {"accept": Status.ACCEPTED, "decline": Status.DECLINED, "cancel": Status.CANCELLED}[decision.action]
        self._settle(waiter, Outcome(status, content, decision.actor))
        return DecisionResult(Verdict.CLAIMED), waiter

    async def check(self, interaction_id: str, actor: Actor) -> DecisionResult:
        """Whether `actor` could decide now, without deciding (before opening a dialog, say). Refusals and late
        clicks get the usual notice."""
        waiter = self._waiters.get(interaction_id)
        if waiter is not None and waiter.outcome is None and waiter.interaction.may_decide(actor):
            return DecisionResult(Verdict.CLAIMED)
        return await self.decide(DecisionIn(interaction_id, actor, "cancel"))

    async def cancel(self, interaction_id: str, actor: Actor) -> DecisionResult:
        """The `cancel` command: same rules as a Cancel button."""
        return await self.decide(DecisionIn(interaction_id, actor, "cancel"))

    def complete(self, interaction_id: str, reason: str) -> bool:
        """Accept an open URL interaction because the server reports its flow done. False if it is not open."""
        waiter = self._waiters.get(interaction_id)
        if waiter is None or waiter.outcome is not None:
            return False
        self._settle(waiter, Outcome(Status.ACCEPTED, reason=reason))
        return True

    def fail(self, interaction_id: str, reason: str) -> None:
        """End an interaction because the request behind it is gone (the server crashed, the call ended)."""
        waiter = self._waiters.get(interaction_id)
        if waiter is not None:
            self._settle(waiter, Outcome(Status.FAILED, reason=reason))

    def withdraw(self, interaction_id: str, reason: str) -> None:
        """End an open interaction as cancelled because its call was stopped or ended without it."""
        waiter = self._waiters.get(interaction_id)
        if waiter is not None:
            self._settle(waiter, Outcome(Status.CANCELLED, reason=reason))

    # -- introspection -------------------------------------------------------------------------------------------

    def open_interactions(self, conversation: ConversationKey | None = None) -> list[Interaction]:
        return [w.interaction for w in self._waiters.values()
                if w.outcome is None and (conversation is None or w.interaction.conversation == conversation)]

    def waiting_for(self, actor: Actor) -> list[tuple[Interaction, CardRef | None]]:
        """Open interactions that wait for this person by name (for a home screen listing what needs them).

        Requests anyone in a conversation may answer are left out: a list outside that conversation would show
        them to people who cannot see it.
        """
        return [(w.interaction, w.card) for w in self._waiters.values()
                if w.outcome is None and actor.key in w.interaction.approvers]

    async def wait_open(self, interaction_id: str) -> Interaction:
        """Wait until an interaction is open here (posted, or resumed after a restart)."""
        while (waiter := self._waiters.get(interaction_id)) is None or waiter.outcome is not None:
            if self._registered is None:
                self._registered = anyio.Event()
            await self._registered.wait()
        return waiter.interaction

    def card_of(self, interaction_id: str) -> CardRef | None:
        waiter = self._waiters.get(interaction_id)
        return waiter.card if waiter else None

    def interaction(self, interaction_id: str) -> Interaction | None:
        waiter = self._waiters.get(interaction_id)
        return waiter.interaction if waiter else None

    def statistics(self) -> dict[str, int]:
        return {"open": sum(1 for w in self._waiters.values() if w.outcome is None),
                "parked": sum(1 for w in self._waiters.values() if w.outcome is None and w.parked is not None)}

    @property
    def closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        """Mark the broker as shutting down: what is cancelled from now on ends as 'shut down', or stays open
        (durable interactions)."""
        self._closing = True


