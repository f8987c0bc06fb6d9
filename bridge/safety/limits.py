"""Bounds that keep a shared host alive, whatever a server or a person does: the `limits:` block of the config.

Pure values and checks, no I/O. A server that asks for a thousand cards in one call, a person with ten thousand
waiting calls, a 5 MB form schema or a 50 MB tool result must not take the bridge (and everyone else on it) down
with it. Over a bound the server gets the protocol's error and the conversation a short notice
(`bridge.requests.limiting`); nothing waits forever.

- open cards per conversation, per person and per call (`OpenCards` counts them);
- server requests (forms, links, sampling, roots) per server per minute;
- a form schema's size in bytes, its number of fields and of options per field (`schema_problem`);
- how much of a tool result the bridge keeps for `show <id>` (chat shows the start of it);
- the size of one message a server sends (a stdio line, an HTTP response body or event): refused as it is read,
  before it is held whole (`bridge.servers.message_bound`);
- the form cache, by bytes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, fields
from typing import Any

_SIZE = re.compile(r"^\s*([0-9]+)\s*([KMG]B?|B)?\s*$", re.I)
_UNITS = {"b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


@dataclass(frozen=True, slots=True)
class Limits:
    open_cards_per_conversation: int = 25
    open_cards_per_person: int = 50
    open_cards_per_call: int = 10
    server_requests_per_minute: int = 60
    """Requests a server makes of people (forms, links, sampling, roots), per server (all its sessions) a minute."""
    schema_size: int = 256 * 1024
    """Bytes of a form's `requestedSchema`, as JSON."""
    schema_fields: int = 50
    schema_options: int = 1000
    """Options of one choice field."""
    tool_result_size: int = 1024**2
    """Characters of a tool result kept for `show <id>`; chat shows the start of it."""
    form_cache_size: int = 16 * 1024**2
    """Bytes of form schemas kept parsed (servers ask the same form again and again)."""
    message_size: int = 0
    """Bytes of one message from a server, as configured; 0 for the default (`message_limit` is the one in force)."""
    served_tasks_per_server: int = 20
    """Tasks the bridge runs for one server at once (its elicitation and sampling requests sent as tasks)."""
    served_task_ttl: int = 86400
    """Seconds the bridge keeps a task it runs for a server, at most, whatever TTL the server asks for."""
    tasks_per_conversation: int = 5
    """Tool calls running as tasks at once in one conversation; more are refused with a note."""
    tasks_per_server: int = 20
    """Tool calls running as tasks at once on one server, over every conversation."""
    task_poll_floor_ms: int = 1000
    """The shortest wait between two `tasks/get` of one task, whatever `pollInterval` the server suggests."""
    task_ttl: int = 86400
    """Seconds the bridge asks a server to keep a task (`task.ttl`); the server's answer is the one honoured."""

    @property
    def message_limit(self) -> int:
        """Bytes of one message from a server (a stdio line, an HTTP response body or server-sent event), refused
        past this as it is read. By default four times `tool_result_size`, and at least `MIN_MESSAGE_SIZE`.

        Four times, because one result of `tool_result_size` characters can come twice in its message (as text and
        as structured content) and JSON escapes make it longer; at least 16 MB, because tool lists, resources and
        prompts come in messages too and are not bounded by the result size. The bridge then holds at most a few
        copies of one message (the bytes, the text, the parsed result) however large the server's answer."""
        return self.message_size or max(MIN_MESSAGE_SIZE, 4 * self.tool_result_size)

    @property
    def kept_results_size(self) -> int:
        """All kept tool results together: the last few results, at most 16 of the largest kind."""
        return 16 * self.tool_result_size


MIN_MESSAGE_SIZE = 16 * 1024**2
"""The default `message_size` when four times `tool_result_size` is less."""
SIZE_KEYS = frozenset({"schema_size", "tool_result_size", "form_cache_size", "message_size"})


def parse_size(value: Any) -> int:
    """Bytes from a number or a string like `256KB`, `1MB`."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = _SIZE.match(str(value))
    if not match:
        raise ValueError("not a size (use a number of bytes or 64KB, 1MB)")
    return int(match.group(1)) * _UNITS[(match.group(2) or "b")[0].lower()]


def from_mapping(data: Mapping[str, Any]) -> Limits:
    """The `limits:` block (already validated by the config schema) as `Limits`; missing keys keep their defaults."""
    known = {f.name for f in fields(Limits)}
    values = {k: parse_size(v) if k in SIZE_KEYS else int(v) for k, v in data.items() if k in known}
    return Limits(**values)


@dataclass(frozen=True, slots=True)
class SchemaShape:
    """What the schema bounds look at: a form schema's number of fields, its largest choice and its size as JSON."""

    fields: int
    options: int
    """The options of the field that has the most."""
    options_field: str
    size: int
    """Bytes of the schema as JSON (UTF-8); -1 when it is not plain JSON (the form builder says so)."""


def schema_shape(schema: Mapping[str, Any], encoded: str | None = None) -> SchemaShape:
    """Measure a form schema: linear in it, one pass. `encoded` is its JSON (`ensure_ascii=False`) when the caller
    made it already (the form cache's key), so the schema is not encoded twice."""
    properties = schema.get("properties")
    fields = options = 0
    options_field = ""
    if isinstance(properties, Mapping):
        fields = len(properties)
        for name, prop in properties.items():
            count = _options(prop)
            if count > options:
                options, options_field = count, str(name)
    if encoded is None:
        try:
            encoded = json.dumps(schema, ensure_ascii=False)
        except (TypeError, ValueError):
            return SchemaShape(fields, options, options_field, -1)
    size = len(encoded) if encoded.isascii() else len(encoded.encode("utf-8"))
    return SchemaShape(fields, options, options_field, size)


def shape_problem(shape: SchemaShape, limits: Limits) -> str | None:
    """Why a schema of this shape is too large to show, or None."""
    if shape.fields > limits.schema_fields:
        return f"the form has {shape.fields} fields; this bridge shows at most {limits.schema_fields}"
    if shape.options > limits.schema_options:
        return (f"the field {shape.options_field[:60]!r} has {shape.options} options; this bridge shows at most "
                f"{limits.schema_options}")
    if shape.size > limits.schema_size:
        return f"the form's schema takes {_kb(shape.size)}; this bridge takes at most {_kb(limits.schema_size)}"
    return None


def schema_problem(schema: Mapping[str, Any], limits: Limits) -> str | None:
    """Why a form schema is too large to show, or None. Linear in the schema; checked before anything else reads
    it, so an oversized schema costs one pass and nothing more."""
    return shape_problem(schema_shape(schema), limits)


def _options(prop: Any) -> int:
    if not isinstance(prop, Mapping):
        return 0
    items = prop.get("items")
    counted = [prop.get("enum"), prop.get("oneOf")]
    if isinstance(items, Mapping):
        counted += [items.get("enum"), items.get("anyOf")]
    return max((len(c) for c in counted if isinstance(c, list)), default=0)


def _kb(size: int) -> str:
    return f"{size / 1024**2:.1f} MB" if size >= 1024**2 else f"{max(1, round(size / 1024))} KB"


@dataclass(frozen=True, slots=True)
class CardKeys:
    """What one open card counts against."""

    conversation: str
    person: str | None
    call: str


class OpenCards:
    """Counts open cards per conversation, per person and per call; `take` refuses one over a bound.

    O(1) per card whatever the number open, so ten thousand waiting calls cost nothing to check."""

    def __init__(self, limits: Limits) -> None:
        self._limits = limits
        self._counts: dict[tuple[str, Hashable], int] = {}

    def take(self, keys: CardKeys) -> str | None:
        """Count one more open card, or say which bound it would break (and count nothing)."""
        bounds = self._bounds(keys)
        for (scope, key), limit, words in bounds:
            if self._counts.get((scope, key), 0) >= limit:
                return words.format(limit=limit)
        for (scope, key), _, _ in bounds:
            self._counts[(scope, key)] = self._counts.get((scope, key), 0) + 1
        return None

    def add(self, keys: CardKeys) -> None:
        """Count an open card whatever the bounds (one admitted before a restart, taken up again)."""
        for (scope, key), _, _ in self._bounds(keys):
            self._counts[(scope, key)] = self._counts.get((scope, key), 0) + 1

    def release(self, keys: CardKeys) -> None:
        for (scope, key), _, _ in self._bounds(keys):
            left = self._counts.get((scope, key), 0) - 1
            if left > 0:
                self._counts[(scope, key)] = left
            else:
                self._counts.pop((scope, key), None)  # forgotten when nothing is open: memory stays bounded

    def open(self, scope: str, key: Hashable) -> int:
        return self._counts.get((scope, key), 0)

    def _bounds(self, keys: CardKeys) -> list[tuple[tuple[str, Hashable], int, str]]:
        limits = self._limits
        out: list[tuple[tuple[str, Hashable], int, str]] = [
            (("call", keys.call), limits.open_cards_per_call,
             "one call may have at most {limit} open requests"),
            (("conversation", keys.conversation), limits.open_cards_per_conversation,
             "this conversation already has {limit} open requests"),
        ]
        if keys.person is not None:
            out.append((("person", keys.person), limits.open_cards_per_person,
                        "{limit} requests already wait for this person"))
        return out
