"""Plurals and persons in the bridge's sentences: `1 prompt`, `2 prompts`; `you want` but `Alice wants`; `your`
but `Alice's`. A person shown as "you" (the console's default name) is the second person."""

from __future__ import annotations

from collections.abc import Sequence

YOU = "you"

_PLURALS = {"was": "were", "is": "are", "has": "have", "this": "these"}


def count(n: int, word: str, plural: str | None = None) -> str:
    """`1 prompt`, `0 prompts`, `2 messages` (with `plural` for words that do not take an s)."""
    return f"{n} {word if n == 1 else plural or _PLURALS.get(word) or word + 's'}"


def is_you(who: str) -> bool:
    return who.strip().lower() == YOU


def acts(who: str, verb: str, *, start: bool = False) -> str:
    """`Alice wants`, `you want` (`verb` in the third person: wants, has, is, asks); `start`: at the start of a
    sentence (`You want`; a name is never changed: `ada.lovelace wants`)."""
    if not is_you(who):
        return f"{who} {verb}"
    who = "You" if start else who
    base = {"has": "have", "is": "are", "does": "do"}.get(verb)
    if base is None:
        base = verb[:-2] if verb.endswith(("ches", "shes", "sses", "xes")) else verb[:-1] if verb.endswith("s") \
            else verb
    return f"{who} {base}"


def possessive(who: str, *, start: bool = False) -> str:
    """`Alice's`, `your` (`Your` at the start of a sentence)."""
    if is_you(who):
        return "Your" if start else "your"
    return f"{who}'s"


def listing(names: Sequence[str], empty: str = "none") -> str:
    """`a`, `a and b`, `a, b and c`; `empty` when there are none."""
    if not names:
        return empty
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
