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
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import anyio

from bridge import observe
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
from bridge.routing import Copy, Routing, base_id
from bridge.secret_answers import for_the_record
from bridge.store import AuditRow, Store, StoredInteraction

logger = logging.getLogger(__name__)



@dataclass(slots=True)
class _Waiter:
    interaction: Interaction
    durable: bool
    card: CardRef | None = None
    outcome: Outcome | None = None
    done: anyio.Event = field(default_factory=anyio.Event)
    copies: list[Copy] = field(default_factory=list)
    wake: anyio.Event = field(default_factory=anyio.Event)
    """Set when the outcome is settled or an approval counted (`progressed`): the waiting task looks again."""
    progressed: bool = False

    def copy(self, interaction_id: str) -> Copy | None:
        return next((c for c in self.copies if c.interaction.id == interaction_id), None)


class Broker:
    """Posts cards through the chat port of each conversation's platform and collects decisions."""

    def __init__(self, store: Store, port_for: Callable[[ConversationKey], ChatPort],
                 routing: Routing | None = None) -> None:
        self._store = store
        self._port_for = port_for
        self._routing = routing
        self._waiters: dict[str, _Waiter] = {}
        self._closing = False
        self._registered = anyio.Event()

    # -- asking --------------------------------------------------------------------------------------------------

    async def ask(self, interaction: Interaction, *, pending_call: str | None = None,
                  input_key: str | None = None) -> Outcome:
        """Post `interaction` and wait for its outcome. Durable interactions (part of a stored 2026 call) survive
        shutdown; the rest are cancelled by it."""
        if self._routing is not None:
            interaction = await self._routing.prepare(interaction)
        self._store.save_interaction(interaction, pending_call=pending_call, input_key=input_key)
        waiter = _Waiter(interaction, durable=pending_call is not None)
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
        return await self._wait(waiter, post_copies=True)

    async def retire(self, stored: StoredInteraction, reason: str) -> None:
        """End an interaction left open by an earlier run that nobody will wait on again: record it as cancelled
        and bring its card (if it was posted) to that final state, so nothing dangles in chat."""
        outcome = Outcome(Status.CANCELLED, reason=reason)
        self._store.finish_interaction(stored.interaction, outcome)
        await self._finish_card(_Waiter(stored.interaction, durable=False, card=stored.card), outcome)

    async def resume(self, interaction: Interaction, card: CardRef | None) -> Outcome:
        """Wait again on an interaction whose card was posted before a restart (with the approvals counted then)."""
        rows = self._store.audit_rows(interaction.id)
        approved = [Actor(row.actor.split(":", 1)[0], row.actor.split(":", 1)[1], row.actor_name or "") for row in rows
                    if row.outcome == APPROVED and row.actor and ":" in row.actor]
        waiter = _Waiter(replace(interaction, approvals=tuple(approved)), durable=True, card=card)
        self._waiters[interaction.id] = waiter
        if card is None:
            try:
                waiter.card = await self._port_for(interaction.conversation).post_card(interaction)
                self._store.set_card(interaction.id, waiter.card)
            except AdapterError as exc:
                logger.warning("could not re-post card %s: %s", interaction.id, exc)
        return await self._wait(waiter)

    async def _wait(self, waiter: _Waiter, post_copies: bool = False) -> Outcome:
        interaction = waiter.interaction
        self._registered.set()
        self._registered = anyio.Event()
        outcome: Outcome | None = None
        try:
            with anyio.move_on_after(max(0.0, interaction.expires_at - time.time())):
                if post_copies and self._routing is not None and interaction.asked:
                    waiter.copies = await self._routing.post_copies(interaction)
                while waiter.outcome is None:
                    await waiter.wake.wait()
                    waiter.wake = anyio.Event()
                    if waiter.outcome is None and waiter.progressed:
                        waiter.progressed = False
                        await self._update_cards(waiter)
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
            if not outcome.approvals and waiter.interaction.approvals:
                outcome = replace(outcome, approvals=waiter.interaction.approvals)  # an end nobody chose: who approved
            waiter.outcome = outcome
            observe.interaction_ended(waiter.interaction, outcome)
            self._store.finish_interaction(waiter.interaction, for_the_record(waiter.interaction, outcome),
                                           _detail(waiter.interaction, outcome))
            waiter.done.set()
            waiter.wake.set()
        return waiter.outcome

    async def _finish_card(self, waiter: _Waiter, outcome: Outcome) -> None:
        with anyio.move_on_after(CLEANUP_TIMEOUT, shield=True):
            if waiter.card is not None:
                try:
                    await self._port_for(waiter.interaction.conversation).finish_card(waiter.card, waiter.interaction,
                                                                                       outcome)
                except AdapterError as exc:
                    logger.warning("could not finish card %s: %s", waiter.interaction.id, exc)
            for copy in waiter.copies:
                try:
                    await copy.port.finish_card(copy.card, self._as_copy(waiter, copy), outcome)
                except AdapterError as exc:
                    logger.warning("could not finish the private copy %s: %s", copy.interaction.id, exc)

    async def _update_cards(self, waiter: _Waiter) -> None:
        """Show the approvals so far on the card and its private copies (not shielded: the card may end meanwhile)."""
        with anyio.move_on_after(CLEANUP_TIMEOUT):
            targets = [(self._port_for(waiter.interaction.conversation), waiter.card, waiter.interaction)] \
                if waiter.card is not None else []
            targets += [(c.port, c.card, self._as_copy(waiter, c)) for c in waiter.copies]
            for port, card, interaction in targets:
                try:
                    await port.update_card(card, interaction)
                except AdapterError as exc:
                    logger.warning("could not show the progress of %s: %s", interaction.id, exc)

    @staticmethod
    def _as_copy(waiter: _Waiter, copy: Copy) -> Interaction:
        return replace(copy.interaction, approvals=waiter.interaction.approvals)

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

    def _claim(self, decision: DecisionIn) -> tuple[DecisionResult, _Waiter | None]:
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
            return DecisionResult(Verdict.REFUSED, message=f"Only {_who(interaction)} can answer this request."), waiter
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

    def _count(self, waiter: _Waiter, actor: Actor, approvals: tuple[Actor, ...]) -> None:
        """One approval of several: its own audit row, and the cards updated by the waiting task."""
        interaction = waiter.interaction = replace(waiter.interaction, approvals=approvals)
        self._store.record(AuditRow(
            time.time(), interaction.id, interaction.kind.value, interaction.server.name, interaction.conversation.id(),
            APPROVED, actor.key, actor.label(), interaction.requester.key if interaction.requester else None,
            f"approval {len(approvals)} of {interaction.required}"))
        waiter.progressed = True
        waiter.wake.set()

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
        waiter = self._waiters.get(interaction_id)
        if waiter is not None:
            self._settle(waiter, Outcome(Status.FAILED, reason=reason))

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
        return self._as_copy(waiter, copy) if waiter and copy else (waiter.interaction if waiter else None)

    def statistics(self) -> dict[str, int]:
        return {"open": sum(1 for w in self._waiters.values() if w.outcome is None)}

    @property
    def closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        """Mark the broker as shutting down: what is cancelled from now on ends as 'shut down', or stays open
        (durable interactions)."""
        self._closing = True


APPROVED = "approved"
"""The audit outcome of one approval on a card that needs several."""


def _detail(interaction: Interaction, outcome: Outcome) -> str:
    """The audit detail of a quorum card's end: who approved, of how many."""
    if interaction.required < 2:
        return ""
    approved = ", ".join(a.label() for a in outcome.approvals) or "nobody"
    return f"{outcome.reason + '; ' if outcome.reason else ''}approvals {len(outcome.approvals)} of " \
           f"{interaction.required}: {approved}"


def _who(interaction: Interaction) -> str:
    if interaction.approvers and (interaction.requester is None or interaction.requester.key not in
                                  interaction.approvers or len(interaction.approvers) > 1):
        return "the approvers named on it"
    return interaction.requester.label() if interaction.requester else "the approvers"
