"""Checking single answers of a form: JSON Schema validation with chat-friendly reasons, and value normalising.

Pure helpers used by `bridge.forms` (fields and forms) so that the form model stays about what a form holds.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Any

import jsonschema
from jsonschema import Draft202012Validator, FormatChecker

FORMAT_CHECKER = FormatChecker()
_EMAIL = re.compile(r"^[^@\s]+@[^@\s.]+(\.[^@\s.]+)+$")
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
    try:
        parsed = _dt.datetime.fromisoformat(candidate.replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        return text  # the format check explains what is wrong
    if parsed.tzinfo is None:
        raise ValueError("add a time zone, e.g. 2026-01-31T09:30:00Z or +01:00")
    return parsed.isoformat().replace("+00:00", "Z")


def validator(schema: dict[str, Any]) -> Draft202012Validator:
    return Draft202012Validator(schema, format_checker=FORMAT_CHECKER)


def missing_name(error: jsonschema.ValidationError) -> str:
    if error.validator == "required":
        match = re.match(r"'([^']+)' is a required property", error.message)
        if match:
            return match.group(1)
    return ""


def friendly(error: jsonschema.ValidationError) -> str:
    """jsonschema's messages quote the value back; these read better in a chat and never echo long input."""
    v = error.validator
    limit: Any = error.validator_value
    if v == "format":
        return {"email": "enter an email address like name@example.com", "uri": "enter a full URL like https://example.com",
                "date": "enter a date as YYYY-MM-DD", "date-time": "enter a date and time like 2026-01-31T09:30:00Z"
                }.get(str(error.validator_value), "wrong format")
    if v == "minLength":
        return f"enter at least {error.validator_value} characters"
    if v == "maxLength":
        return f"enter at most {error.validator_value} characters"
    if v == "minimum":
        return f"must be at least {num(limit)}"
    if v == "maximum":
        return f"must be at most {num(limit)}"
    if v == "minItems":
        return f"choose at least {error.validator_value}"
    if v == "maxItems":
        return f"choose at most {error.validator_value}"
    if v == "enum":
        return "not one of the options"
    if v == "type":
        expected = error.validator_value
        return {"integer": "enter a whole number", "number": "enter a number", "boolean": "answer yes or no",
                "string": "enter text", "array": "choose from the options"}.get(str(expected), f"must be {expected}")
    if v == "required":
        return "this field is required"
    if v == "uniqueItems":
        return "choose each option once"
    return error.message[:200]
