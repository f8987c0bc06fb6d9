"""How the core words outcomes for people: the one place card footers, notices and command replies get them from.

Adapters render these strings in their own markup; keeping the wording here means Slack, Matrix and the console
say the same thing about the same outcome.
"""

from __future__ import annotations

from bridge.model import Outcome, Status


def describe_status(outcome: Outcome) -> str:
    """'accepted by Ada', 'expired', 'ended (failed)': the outcome without its reason."""
    by = f" by {outcome.by.label()}" if outcome.by else ""
    return {Status.ACCEPTED: f"accepted{by}", Status.DECLINED: f"declined{by}", Status.CANCELLED: f"cancelled{by}",
            Status.EXPIRED: "expired", Status.FAILED: "ended (failed)", Status.OPEN: "open"}[outcome.status]


def describe_outcome(outcome: Outcome) -> str:
    """A one-line summary of an outcome for cards: 'accepted by Ada', 'expired', 'cancelled: the bridge restarted'.

    The reason is added where nobody decided (a failure, a cancel by the bridge itself), since then it is the only
    explanation a person gets.
    """
    text = describe_status(outcome)
    return f"{text}: {outcome.reason}" if outcome.reason and outcome.status in (Status.FAILED, Status.CANCELLED) \
        and outcome.by is None else text
