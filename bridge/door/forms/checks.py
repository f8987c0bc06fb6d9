"""Checking single answers of a form: format checkers, chat-friendly reasons, and value normalising.

Pure helpers used by `bridge.door.forms.model` so that the form model stays about what a form holds. Formats are checked
with jsonschema's `FormatChecker` (plus a stricter email check), the same one the schema check uses.
"""

from __future__ import annotations

import datetime as _dt
import re

from jsonschema import FormatChecker

FORMAT_CHECKER = FormatChecker()
_EMAIL = re.compile(r"^[^@\s]+@[^@\s.]+(\.[^@\s.]+)+$")
_CALENDAR_DATE_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}")
"""The start of RFC 3339's date-time (a space allowed for T). `fromisoformat` reads more (ISO week dates such as
`2026-W01-1T10:00Z`, `20260131T1000Z`), which the format check (jsonschema's, RFC 3339) refuses: those are left
as typed, so the person is told what to write instead of having them silently rewritten."""
TRUE_WORDS = frozenset({"y", "yes", "true", "t", "1", "on"})
FALSE_WORDS = frozenset({"n", "no", "false", "f", "0", "off"})


@FORMAT_CHECKER.checks("email")
def _is_email(value: object) -> bool:
    """jsonschema's own email check only looks for an "@"; a chat form should catch `ada@` and `ada@example`."""
    return not isinstance(value, str) or bool(_EMAIL.match(value))


def num(value: float) -> str:
    """A limit as a person reads it; exact for integers of any size (a float() of a 400-digit one overflows)."""
    if isinstance(value, int):
        return str(value) if len(str(value)) <= 30 else f"{str(value)[:27]}…"
    return str(int(value)) if value.is_integer() else repr(value)


def shorten_answer(text: str, limit: int = 40) -> str:
    """A person's answer quoted back in a message, cut: a pasted page is not repeated in full."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def normalise_datetime(text: str) -> str:
    """Accept `YYYY-MM-DD HH:MM[:SS]` with a zone as well as strict RFC 3339, and send RFC 3339."""
    candidate = text.replace(" ", "T", 1) if "T" not in text and " " in text else text
    if not _CALENDAR_DATE_TIME.match(candidate):
        return text
    try:
        parsed = _dt.datetime.fromisoformat(candidate.replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        return text  # the format check explains what is wrong
    if parsed.tzinfo is None:
        raise ValueError("add a time zone, e.g. 2026-01-31T09:30:00Z or +01:00")
    return parsed.isoformat().replace("+00:00", "Z")


FORMAT_REASONS = {"email": "enter an email address like name@example.com",
                  "uri": "enter a full URL like https://example.com", "date": "enter a date as YYYY-MM-DD",
                  "date-time": "enter a date and time like 2026-01-31T09:30:00Z"}


_WELL_FORMED_DATE = re.compile(r"\d{4}-\d{2}-\d{2}\Z", re.ASCII)


def format_reason(fmt: str, value: str = "") -> str:
    """Why `value` is not of the format: a well-formed date that is not in the calendar (2026-02-30) is told so."""
    if fmt == "date" and _WELL_FORMED_DATE.match(value):
        return f"{value} is not a date that exists (check the month and the day)"
    return FORMAT_REASONS.get(fmt, "wrong format")
