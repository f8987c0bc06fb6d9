"""The broker: posts interaction cards, waits for a person, and turns the first valid decision into an outcome.

It is the only owner of interaction deadlines (anyio cancel scopes). A decision is claimed without awaiting anything
first, so two clicks racing on one card cannot both win: the second finds the interaction decided and gets a notice.
People who may not decide are refused privately and the card stays open. Whatever happens (a decision, expiry, the
request being withdrawn, shutdown) the card is brought to a final state in a shielded scope and the outcome is
written to the audit log, except for durable (2026-era) interactions at shutdown: those stay open in the store and
are answered after a restart.

Cards that need several approvers (`Interaction.required`) count each person's approval once, as its own audit row,
and show the progress on every copy of the card; one decline or cancel by an approver ends them. Who may decide and
who is asked privately is `bridge.routing`'s; the broker posts those private copies and finishes them with the card.

A durable interaction may also be *parked* (`ask(..., park=True)`): its card (and copies) posted, `ask` raises
`Parked`, and no task waits for it. The broker's one timer (`bridge.deadlines`) keeps its deadline; once it ends, the
broker finishes its cards and hands the outcome to `on_parked` (the tool-call owner continues the call) in its `run`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace

import anyio
from anyio.abc import TaskGroup, TaskStatus

from bridge import observe
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
from bridge.routing import Routing, base_id
from bridge.secret_answers import for_the_record
from bridge.store import Store, StoredInteraction
from bridge.waiters import Parked, ParkedHandler, Waiter, approval_row, approvals_from, quorum_detail, who_decides

logger = logging.getLogger(__name__)


class Broker:
    """Posts cards through the chat port of each conversation's platform and collects decisions."""

    def __init__(self, store: Store, port_for: Callable[[ConversationKey], ChatPort],
                 routing: Routing | None = None) -> None:
        self._store = store
        self._port_for = port_for
        self._routing = routing
        self._waiters: dict[str, Waiter] = {}
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
        shutdown; the rest are cancelled by it. With `park` (durable ones only), raise `Parked` once posted."""
        if self._routing is not None:
            interaction = await self._routing.prepare(interaction)
        self._store.save_interaction(interaction, pending_call=pending_call, input_key=input_key)
        waiter = Waiter(interaction, durable=pending_call is not None)
        if interaction.required > 1 and len(interaction.approvers) < interaction.required:
            reason = f"it needs {interaction.required} approvers and only {len(interaction.approvers)} could be found"
            return self._settle(waiter, Outcome(Status.FAILED, reason=reason))
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
        observe.card_posted(interaction)
        if park and pending_call is not None and input_key is not None:
            await self._post_copies(waiter)
            if waiter.outcome is None:
                self._park(waiter, pending_call, input_key)
                raise Parked(interaction.id)
            return await self._wait(waiter)
        return await self._wait(waiter, post_copies=True)

    async def repark(self, interaction: Interaction, card: CardRef | None, pending_call: str, input_key: str) -> None:
        """Take up again, parked, an interaction whose card was posted before a restart (posting it if it was not),
        with the approvals counted then."""
        approved = approvals_from(self._store.audit_rows(interaction.id))
        waiter = Waiter(replace(interaction, approvals=approved), durable=True, card=card)
        self._waiters[interaction.id] = waiter
        if card is None:
            try:
                waiter.card = await self._port_for(interaction.conversation).post_card(interaction)
                self._store.set_card(interaction.id, waiter.card)
                observe.card_posted(interaction)
            except AdapterError as exc:
                logger.warning("could not re-post card %s: %s", interaction.id, exc)
        if waiter.outcome is None:
            self._park(waiter, pending_call, input_key)

    def _park(self, waiter: Waiter, pending_call: str, input_key: str) -> None:
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

    async def _after_parked(self, waiter: Waiter, outcome: Outcome) -> None:
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
        await self._finish_card(Waiter(stored.interaction, durable=False, card=stored.card), outcome)

    async def _wait(self, waiter: Waiter, post_copies: bool = False) -> Outcome:
        interaction = waiter.interaction
        self._opened()
        outcome: Outcome | None = None
        try:
            with anyio.move_on_after(max(0.0, interaction.expires_at - time.time())):
                if post_copies:
                    await self._post_copies(waiter)
                while waiter.outcome is None:
                    if waiter.progressed:  # checked before each wait: an approval counted meanwhile is not missed
                        waiter.progressed = False
                        await self._update_cards(waiter)
                        continue
                    waiter.wake = anyio.Event()
                    await waiter.wake.wait()
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

    async def _post_copies(self, waiter: Waiter) -> None:
        if self._routing is not None and waiter.interaction.asked:
            waiter.copies = await self._routing.post_copies(waiter.interaction)

    def _settle(self, waiter: Waiter, outcome: Outcome) -> Outcome:
        """Record an outcome exactly once; the first writer wins."""
        if waiter.outcome is None:
            if not outcome.approvals and waiter.interaction.approvals:
                outcome = replace(outcome, approvals=waiter.interaction.approvals)  # an end nobody chose: who approved
            waiter.outcome = outcome
            observe.interaction_ended(waiter.interaction, outcome)
            self._store.finish_interaction(waiter.interaction, for_the_record(waiter.interaction, outcome),
                                           quorum_detail(waiter.interaction, outcome))
            waiter.poke()
            if waiter.parked is not None:
                self._waiters.pop(waiter.interaction.id, None)
                if self._tg is None:
                    logger.warning("parked interaction %s ended while the broker is not running",
                                   waiter.interaction.id)
                else:
                    self._tg.start_soon(self._after_parked, waiter, outcome)
        return waiter.outcome

    async def _finish_card(self, waiter: Waiter, outcome: Outcome) -> None:
        with anyio.move_on_after(CLEANUP_TIMEOUT, shield=True):
            if waiter.card is not None:
                try:
                    await self._port_for(waiter.interaction.conversation).finish_card(waiter.card, waiter.interaction,
                                                                                       outcome)
                except AdapterError as exc:
                    logger.warning("could not finish card %s: %s", waiter.interaction.id, exc)
            for copy in waiter.copies:
                try:
                    await copy.port.finish_card(copy.card, waiter.as_copy(copy), outcome)
                except AdapterError as exc:
                    logger.warning("could not finish the private copy %s: %s", copy.interaction.id, exc)

    async def _update_cards(self, waiter: Waiter) -> None:
        """Show the approvals so far on the card and its private copies (not shielded: the card may end meanwhile)."""
        with anyio.move_on_after(CLEANUP_TIMEOUT):
            targets = [(self._port_for(waiter.interaction.conversation), waiter.card, waiter.interaction)] \
                if waiter.card is not None else []
            targets += [(c.port, c.card, waiter.as_copy(c)) for c in waiter.copies]
            for port, card, interaction in targets:
                try:
                    await port.update_card(card, interaction)
                except AdapterError as exc:
                    logger.warning("could not show the progress of %s: %s", interaction.id, exc)

    # -- deciding ------------------------------------------------------------------------------------------------

    async def decide(self, decision: DecisionIn) -> DecisionResult:
        """Apply a person's decision. Claims synchronously, then tells the person anything they need to know."""
        result, waiter = self._claim(decision)
        if result.verdict not in (Verdict.CLAIMED, Verdict.COUNTED, Verdict.INVALID) and result.message:
            copy = waiter.copy(decision.interaction_id) if waiter else None
            conversation = (copy.interaction if copy else waiter.interaction).conversation if waiter else None
            stored = None if waiter else self._store.interaction(base_id(decision.interaction_id))
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

    def _claim(self, decision: DecisionIn) -> tuple[DecisionResult, Waiter | None]:
        waiter = self._waiters.get(base_id(decision.interaction_id))
        if waiter is None or waiter.outcome is not None:
            stored = self._store.interaction(base_id(decision.interaction_id))
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
            refusal = f"Only {who_decides(interaction)} can answer this request."
            return DecisionResult(Verdict.REFUSED, message=refusal), waiter
        if decision.grant and (decision.action != "accept" or decision.grant not in
                               {g.scope for g in interaction.grants}):
            return DecisionResult(Verdict.INVALID, message="That choice is not offered on this request."), waiter
        content: dict[str, JSONValue] | None = None
        if decision.action == "accept" and not interaction.form.empty:
            given = decision.content
            if interaction.required > 1 and given is not None and given != interaction.form.defaults():
                # Each approver approves what everyone sees; an edit would make the approvals disagree.
                return DecisionResult(Verdict.INVALID, message="A request that needs several approvers is approved "
                                                               "as shown; it cannot be edited."), waiter
            if given is None and interaction.quick_accept:
                given = interaction.form.defaults()
            content, errors = interaction.form.validate(given or {})
            if errors:
                return DecisionResult(Verdict.INVALID, errors=errors.fields,
                                      message=errors.summary() or "the answer is not valid"), waiter
        status = {"accept": Status.ACCEPTED, "decline": Status.DECLINED, "cancel": Status.CANCELLED}[decision.action]
        approvals = interaction.approvals
        if status is Status.ACCEPTED and interaction.required > 1:
            if any(a.key == decision.actor.key for a in approvals):
                more = interaction.required - len(approvals)
                return DecisionResult(Verdict.REFUSED, message=f"You have already approved this request; it needs "
                                                               f"{more} more approval{'s' if more != 1 else ''} from "
                                                               "someone else."), waiter
            approvals = (*approvals, decision.actor)
            if len(approvals) < interaction.required:
                self._count(waiter, decision.actor, approvals)
                return DecisionResult(Verdict.COUNTED), waiter
        self._settle(waiter, Outcome(status, content, decision.actor, approvals=approvals, grant=decision.grant))
        return DecisionResult(Verdict.CLAIMED), waiter

    def _count(self, waiter: Waiter, actor: Actor, approvals: tuple[Actor, ...]) -> None:
        """One approval of several: its own audit row, and the cards updated by the waiting task."""
        waiter.interaction = replace(waiter.interaction, approvals=approvals)
        self._store.record(approval_row(waiter.interaction, actor))
        waiter.progressed = True
        waiter.poke()
        if waiter.parked is not None and self._tg is not None:
            self._tg.start_soon(self._update_cards, waiter)  # nobody waits on a parked card: show the progress now

    async def check(self, interaction_id: str, actor: Actor) -> DecisionResult:
        """Whether `actor` could decide now, without deciding (before opening a dialog, say). Refusals and late
        clicks get the usual notice."""
        waiter = self._waiters.get(base_id(interaction_id))
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
        if (waiter := self._waiters.get(interaction_id)) is not None:
            self._settle(waiter, Outcome(Status.FAILED, reason=reason))

    def withdraw(self, interaction_id: str, reason: str) -> None:
        """End an open interaction as cancelled because its call was stopped or ended without it."""
        if (waiter := self._waiters.get(interaction_id)) is not None:
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
        while (waiter := self._waiters.get(base_id(interaction_id))) is None or waiter.outcome is not None:
            if self._registered is None:
                self._registered = anyio.Event()
            await self._registered.wait()
        return waiter.interaction

    def card_of(self, interaction_id: str) -> CardRef | None:
        waiter = self._waiters.get(base_id(interaction_id))
        copy = waiter.copy(interaction_id) if waiter else None
        return copy.card if copy else (waiter.card if waiter else None)

    def interaction(self, interaction_id: str) -> Interaction | None:
        """The open interaction, or the private copy a card id names."""
        waiter = self._waiters.get(base_id(interaction_id))
        copy = waiter.copy(interaction_id) if waiter else None
        return waiter.as_copy(copy) if waiter and copy else (waiter.interaction if waiter else None)

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


