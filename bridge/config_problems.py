"""How a config problem is worded: where it is (`servers.github.env`), and what is wrong, in the bridge's words.

jsonschema's and PyYAML's own messages quote the offending value or line, which may be a secret pasted in the wrong
place: these never do.
"""

from __future__ import annotations

import re
from typing import Any

import yaml


def yaml_problem(exc: yaml.YAMLError) -> str:
    """Where and what, in one line; never the offending line itself (it may hold a secret)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or "cannot parse"
    context = getattr(exc, "context", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return where + problem + (f" ({context})" if context else "")


def where(parts: Any) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top)"


def message(error: Any) -> str:
    if error.validator == "additionalProperties":
        extra = re.findall(r"'([^']+)'", error.message.split("(")[-1])
        return f"unknown key {', '.join(extra) or error.message}" if extra else error.message
    if error.validator == "enum":
        return f"must be one of {', '.join(map(str, error.validator_value))}"
    if error.validator == "oneOf" and "duration" in str(error.schema.get("description", "")):
        return "must be a duration: a number of seconds above 0, or like 30s, 10m, 2h"
    if error.validator == "oneOf" and "Bytes" in str(error.schema.get("description", "")):
        return "must be a size like 64KB or 1MB"
    if error.validator == "required":
        return str(error.message).replace("is a required property", "is required")
    # jsonschema's own messages quote the offending value, which may be a secret pasted in the wrong place.
    if error.validator == "type":
        expected = error.validator_value
        return f"must be of type {' or '.join(expected) if isinstance(expected, list) else expected}"
    if error.validator == "pattern":
        return f"does not match the pattern {error.validator_value}"
    if error.validator in ("minimum", "exclusiveMinimum", "maximum"):
        return f"is out of range ({error.validator} {error.validator_value})"
    if error.validator == "oneOf":
        return "is not a valid value here"
    return f"is not valid ({error.validator})"
