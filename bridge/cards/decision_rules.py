"""Whether a person's decision on an open interaction counts, and as what (pure: no I/O, no state).

The same rules apply wherever the interaction is waited on: in this process (`Broker`), or on another worker (the
decision is then claimed in the store directly, or forwarded to the worker holding it). Cards that need several
approvers (`Interaction.required`) count each approval once (`Counted`) until enough have approved; their audit rows
and the end's detail are built here too.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from bridge.door.model import Actor, DecisionIn, DecisionResult, Interaction, JSONValue, Outcome, Status, Verdict
from bridge.storage.rows import AuditRow

_STATUS = {"accept": Status.ACCEPTED, "decline": Status.DECLINED, "cancel": Status.CANCELLED}

APPROVED = "approved"
"""The audit outcome of one approval on a card that needs several."""


@dataclass(frozen=True, slots=True)
class Counted:
    """One approval of several, not yet enough: the approvals so far, this one last."""

    approvals: tuple[Actor, ...]


def judge(interaction: Interaction, decision: DecisionIn) -> Outcome | Counted | DecisionResult:
    """The outcome this decision gives the interaction, an approval counted towards it, or why it does not count
    (refused, invalid)."""
    if not interaction.may_decide(decision.actor):
        return DecisionResult(Verdict.REFUSED, message=f"Only {who_may(interaction)} can answer this request.")
    if decision.grant and (decision.action != "accept" or decision.grant not in {g.scope for g in interaction.grants}):
        return DecisionResult(Verdict.INVALID, message="That choice is not offered on this request.")
    content: dict[str, JSONValue] | None = None
    if decision.action == "accept" and not interaction.form.empty:
        given = decision.content
        if interaction.required > 1 and given is not None and given != interaction.form.defaults():
            # Each approver approves what everyone sees; an edit would make the approvals disagree.
            return DecisionResult(Verdict.INVALID, message="A request that needs several approvers is approved "
                                                           "as shown; it cannot be edited.")
        if given is None and interaction.quick_accept:
            given = interaction.form.defaults()
        content, errors = interaction.form.validate(given or {})
        if errors:
            return DecisionResult(Verdict.INVALID, errors=errors.fields,
                                  message=errors.summary() or "the answer is not valid")
    status = _STATUS[decision.action]
    approvals = interaction.approvals
    if status is Status.ACCEPTED and interaction.required > 1:
        if any(a.key == decision.actor.key for a in approvals):
            more = interaction.required - len(approvals)
            return DecisionResult(Verdict.REFUSED, message=f"You have already approved this request; it needs "
                                                           f"{more} more approval{'s' if more != 1 else ''} from "
                                                           "someone else.")
        approvals = (*approvals, decision.actor)
        if len(approvals) < interaction.required:
            return Counted(approvals)
    return Outcome(status, content, decision.actor, approvals=approvals, grant=decision.grant)


def approval_row(interaction: Interaction, actor: Actor, approvals: tuple[Actor, ...]) -> AuditRow:
    """The audit row of one approval of several."""
    return AuditRow(time.time(), interaction.id, interaction.kind.value, interaction.server.name,
                    interaction.conversation.id(), APPROVED, actor.key, actor.label(),
                    interaction.requester.key if interaction.requester else None,
                    f"approval {len(approvals)} of {interaction.required}")


def approvals_in(rows: list[AuditRow]) -> tuple[Actor, ...]:
    """Who approved, from an interaction's audit rows (a card waited on again after a restart)."""
    return tuple(Actor(row.actor.split(":", 1)[0], row.actor.split(":", 1)[1], row.actor_name or "") for row in rows
                 if row.outcome == APPROVED and row.actor and ":" in row.actor)


def end_detail(interaction: Interaction, outcome: Outcome) -> str:
    """The audit detail of a quorum card's end: who approved, of how many."""
    if interaction.required < 2:
        return ""
    approved = ", ".join(a.label() for a in outcome.approvals) or "nobody"
    return f"{outcome.reason + '; ' if outcome.reason else ''}approvals {len(outcome.approvals)} of " \
           f"{interaction.required}: {approved}"


def who_may(interaction: Interaction) -> str:
    if interaction.approvers and (interaction.requester is None or interaction.requester.key not in
                                  interaction.approvers or len(interaction.approvers) > 1):
        return "the approvers named on it"
    return interaction.requester.label() if interaction.requester else "the approvers"
