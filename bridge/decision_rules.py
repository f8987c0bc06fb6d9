"""Whether a person's decision on an open interaction counts, and as what outcome (pure: no I/O, no state).

The same rules apply wherever the interaction is waited on: in this process (`Broker`), or on another worker (the
decision is then claimed in the store directly).
"""

from __future__ import annotations

from bridge.model import DecisionIn, DecisionResult, Interaction, JSONValue, Outcome, Status, Verdict

_STATUS = {"accept": Status.ACCEPTED, "decline": Status.DECLINED, "cancel": Status.CANCELLED}


def judge(interaction: Interaction, decision: DecisionIn) -> Outcome | DecisionResult:
    """The outcome this decision would give the interaction, or why it does not count (refused, invalid)."""
    if not interaction.may_decide(decision.actor):
        who = interaction.requester.label() if interaction.requester else "the approvers"
        return DecisionResult(Verdict.REFUSED, message=f"Only {who} can answer this request.")
    content: dict[str, JSONValue] | None = None
    if decision.action == "accept" and not interaction.form.empty:
        given = decision.content
        if given is None and interaction.quick_accept:
            given = interaction.form.defaults()
        content, errors = interaction.form.validate(given or {})
        if errors:
            return DecisionResult(Verdict.INVALID, errors=errors.fields,
                                  message=errors.summary() or "the answer is not valid")
    return Outcome(_STATUS[decision.action], content, decision.actor)
