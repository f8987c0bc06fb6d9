"""Answers to secret-looking fields are kept out of the record: the store and the audit get "(given)", the server
the value.

The spec forbids servers to ask for passwords, tokens or card numbers in a form, and the card warns; if someone
answers anyway, the value goes to the server that asked and nowhere else. Which fields look secret is decided once,
by `bridge.safety.secret_names`, when the form is built (`Form.secret_fields`).
"""

from __future__ import annotations

from dataclasses import replace

from bridge.door.model import Interaction, Outcome

GIVEN = "(given)"


def for_the_record(interaction: Interaction, outcome: Outcome) -> Outcome:
    """The outcome as it may be stored: every answered secret-looking field replaced by `GIVEN`."""
    secret = {f.name for f in interaction.form.secret_fields}
    if not secret or not outcome.content or not secret & set(outcome.content):
        return outcome
    content = {k: GIVEN if k in secret and v not in (None, "") else v for k, v in outcome.content.items()}
    return replace(outcome, content=content)


def withheld(interaction: Interaction, outcome: Outcome) -> bool:
    """Whether a stored outcome lacks values the server needs (so the question must be asked again)."""
    secret = {f.name for f in interaction.form.secret_fields}
    return any(outcome.content.get(name) == GIVEN for name in secret) if outcome.content else False
