"""Server errors a person can act on, in one plain sentence: a Python server's argument validation failure
(pydantic's `1 validation error for echoArguments / message / Input should be a valid string [type=…] / For
further information visit https://errors.pydantic.dev/…`) becomes `message should be a valid string`."""

from __future__ import annotations

import re

_HEAD = re.compile(r"\b\d+ validation errors? for \w+\s*$")
_DETAIL = re.compile(r"^\s+(?P<message>[^\[]+?)\s*(?:\[type=(?P<type>[\w.]+)[^\]]*\])?\s*$")
_MAX_FIELDS = 5


def validation_summary(text: str) -> str | None:
    """The fields and what is wrong with each, or None when `text` is not a validation error report."""
    lines = text.strip().splitlines()
    start = next((n for n, line in enumerate(lines) if _HEAD.search(line)), None)
    if start is None:
        return None
    problems: list[str] = []
    field: str | None = None
    for line in lines[start + 1:]:
        if "errors.pydantic.dev" in line or not line.strip():
            continue
        detail = _DETAIL.match(line) if line[:1].isspace() else None
        if detail is None:
            field = line.strip()
            continue
        problems.append(_problem(field or "the arguments", detail["message"], detail["type"] or ""))
        field = None
    if not problems:
        return None
    shown = problems[:_MAX_FIELDS] + ([f"{len(problems) - _MAX_FIELDS} more"] if len(problems) > _MAX_FIELDS else [])
    return "; ".join(shown)


def _problem(field: str, message: str, kind: str) -> str:
    if kind == "missing" or message == "Field required":
        return f"{field} is required"
    if kind == "extra_forbidden":
        return f"{field} is not an argument of this tool"
    if message.startswith("Input should be "):
        return f"{field} should be {message.removeprefix('Input should be ')}"
    return f"{field}: {message[:1].lower()}{message[1:]}"
