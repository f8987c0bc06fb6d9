"""Approver entries that can never match anyone, found when the config is loaded (so `check-config` and `run` say so).

An approver (in an `approvers` list or rule, or a group) is `platform:user_id`, compared exactly with the person who
clicks (`Actor.key`): `Slack:U1` (the platform in the wrong case), `U1` (no platform), `*` or `slack:*` (no
wildcards), `slack:ada` (a name, not an id) or `matrix:ada` (no homeserver) would silently leave a server's requests to
nobody but the requester. Each problem names the entry's path; approver ids are not secrets, so the entry is shown.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

PLATFORMS = ("console", "slack", "matrix")
_SLACK_ID = re.compile(r"^[UW][A-Z0-9]+$")
_MATRIX_ID = re.compile(r"^@[^:\s]+:\S+$")
EXAMPLES = "slack:U024BE7LH, matrix:@ada:example.org or console:you"


def problem(entry: str) -> str | None:
    """Why an approver entry can never match, or None."""
    if "*" in entry or "?" in entry:
        return f"{entry!r} can never match: approvers are people, one by one, without wildcards ({EXAMPLES})"
    platform, sep, user = entry.partition(":")
    if not sep:
        return f"{entry!r} can never match: it needs its platform, as in {EXAMPLES}"
    if platform not in PLATFORMS:
        if platform.lower() in PLATFORMS:
            return f"{entry!r} can never match: write the platform in lower case ({platform.lower()}:{user})"
        return f"{entry!r} can never match: the platform must be one of {', '.join(PLATFORMS)}"
    if not user.strip() or user != user.strip():
        return f"{entry!r} can never match: the user id is empty or has spaces around it"
    if platform == "slack" and not _SLACK_ID.match(user):
        return f"{entry!r} can never match: Slack user ids look like U024BE7LH (not a name or @mention)"
    if platform == "matrix" and not _MATRIX_ID.match(user):
        return f"{entry!r} can never match: Matrix user ids look like @ada:example.org"
    return None


def problems(data: Any) -> list[str]:
    """Every approver entry of a config that can never match: in any `approvers` list or rule's `people`, and in the
    top-level `groups` (a list, or a group's `people`)."""
    return [f"{path}: {why}" for path, entry in _entries(data, "") if (why := problem(entry)) is not None]


def _entries(node: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        for key, value in node.items():
            where = f"{path}.{key}" if path else str(key)
            if key == "approvers":
                yield from _people(value, where)
            elif key == "groups" and not path and isinstance(value, dict):
                for name, group in value.items():
                    yield from _people(group, f"groups.{name}")
            else:
                yield from _entries(value, where)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _entries(value, f"{path}[{i}]")


def _people(value: Any, where: str) -> Iterator[tuple[str, str]]:
    """The entries of a list of people, or of the `people` of a rule or group written as an object."""
    if isinstance(value, dict):
        value, where = value.get("people"), f"{where}.people"
    if isinstance(value, list):
        yield from ((f"{where}[{i}]", v) for i, v in enumerate(value) if isinstance(v, str))
