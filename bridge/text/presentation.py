"""How the core words outcomes for people: the one place card footers, notices and command replies get them from.

Adapters render these strings in their own markup; keeping the wording here means Slack, Matrix and the console
say the same thing about the same outcome. Where a person is named, adapters may pass `person` to put in a mention of
their own (it gets the actor key and the plain label); the default is the plain label.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bridge.door.model import Actor, Interaction, Outcome, Status

Person = Callable[[str, str], str]
"""(actor key, plain label) → how the name appears."""


def plain(key: str, label: str) -> str:
    return label


def names(people: Sequence[str]) -> str:
    """'Ada', 'Ada and Bob', 'Ada, Bob and Cy'."""
    if len(people) < 2:
        return "".join(people)
    return f"{', '.join(people[:-1])} and {people[-1]}"


def _named(actors: Sequence[Actor], person: Person) -> str:
    return names([person(a.key, a.label()) for a in actors])


def describe_status(outcome: Outcome, person: Person = plain) -> str:
    """'accepted by Ada', 'expired', 'ended (failed)': the outcome without its reason. On a card that needed several
    approvers it names everyone who decided: 'accepted by Ada and Bob', 'declined by Cy (after approvals by Ada)'."""
    by = f" by {person(outcome.by.key, outcome.by.label())}" if outcome.by else ""
    if outcome.status is Status.ACCEPTED and len(outcome.approvals) > 1:
        by = f" by {_named(outcome.approvals, person)}"
    text = {Status.ACCEPTED: f"accepted{by}", Status.DECLINED: f"declined{by}", Status.CANCELLED: f"cancelled{by}",
            Status.EXPIRED: "expired", Status.FAILED: "ended (failed)", Status.OPEN: "open"}[outcome.status]
    if outcome.status is not Status.ACCEPTED and outcome.approvals:
        text += f" (after approvals by {_named(outcome.approvals, person)})"
    return text


def already_ended(outcome: Outcome) -> str:
    """The reply to a decision on a request that had ended: 'That request was already declined by Bob.'"""
    return f"That request was already {describe_status(outcome)}."


# Replies to a decision that did not count for other reasons; the broker and the forwarding to other workers give them.
STORE_FAILED = "The bridge could not record that decision; try again in a moment."
NOT_ANSWERING = ("The bridge worker holding that request is not answering (it may have stopped); if it did, the "
                 "request will be closed shortly and the conversation told.")
UNKNOWN_REQUEST = "That request is not known here."
NO_LONGER_OPEN = "That request is no longer open here."
RESTORING = "That request is being restored; try again in a moment."


def describe_outcome(outcome: Outcome, person: Person = plain) -> str:
    """A one-line summary of an outcome for cards: 'accepted by Ada', 'expired', 'cancelled: the bridge restarted'.

    The reason is added where nobody decided (a failure, a cancel by the bridge itself, a link flow or sign-in the
    bridge saw finish), since then it is the only explanation a person gets.
    """
    text = describe_status(outcome, person)
    return f"{text}: {outcome.reason}" if outcome.reason and outcome.status in (
        Status.FAILED, Status.CANCELLED, Status.ACCEPTED) and outcome.by is None else text


def describe_progress(interaction: Interaction, person: Person = plain) -> list[str]:
    """What an open card says about its people: approvals so far and who still may (quorum cards), and who was also
    asked privately. Empty for a card one person decides in its own conversation."""
    lines: list[str] = []
    if interaction.required > 1:
        so_far = len(interaction.approvals)
        head = f"Needs {interaction.required} approvals from different people; {so_far} so far"
        lines.append(head + (f" ({_named(interaction.approvals, person)})." if so_far else "."))
        waiting = interaction.still_may()
        if waiting:
            lines.append("May approve: " + names([person(k, k.split(":", 1)[-1]) for k in waiting]) +
                         ". One decline ends it.")
    if interaction.asked and interaction.origin is None:
        lines.append("Also asked privately: " + names([person(k, k.split(":", 1)[-1]) for k in interaction.asked]) +
                     ".")
    return lines
