"""The start of a long text without the rest of it: what a huge tool result costs to show.

An `Excerpt` is the first `limit` characters of a text that is never built whole, and that text's full length, so
the note saying how much was left out is exact. Parts are added as they are (a slice of each is copied, at most what
still fits); JSON is written as chunks (`json_chunks`), a long string in slices, so a 16 MB value costs a slice at a
time to measure, not a second copy of itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

SLICE = 65536
"""Characters of a long JSON string encoded at a time."""


class Excerpt:
    """The first `limit` characters of a text given part by part, and the whole text's length."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.length = 0
        """Characters of the whole text."""
        self._kept: list[str] = []
        self._room = limit

    def add(self, part: str) -> None:
        self.length += len(part)
        if self._room > 0 and part:
            piece = part if len(part) <= self._room else part[:self._room]
            self._kept.append(piece)
            self._room -= len(piece)

    def extend(self, parts: Iterable[str]) -> None:
        for part in parts:
            self.add(part)

    @property
    def full(self) -> bool:
        """Nothing more would be kept: the limit is reached."""
        return self._room <= 0

    @property
    def left_out(self) -> int:
        return self.length - (self.limit - self._room)

    def text(self) -> str:
        """The characters kept (all of the text when `left_out` is 0)."""
        return "".join(self._kept)

    def shortened(self, limit: int | None = None, note: int = 40) -> str:
        """As `bridge.text.plain.shorten` words it for the whole text: all of it if it fits in `limit` (this
        excerpt's own by default), else its first `limit - note` characters and how many more there were."""
        limit = self.limit if limit is None else limit
        kept = self.text()
        if self.length <= limit:
            return kept
        return kept[: max(0, limit - note)].rstrip() + f"… [{self.length - limit + note} more characters]"


def json_chunks(value: Any, indent: int = 1, level: int = 0) -> Iterator[str]:
    """`json.dumps(value, ensure_ascii=False, indent=indent)`, as chunks whose concatenation is that text, a long
    string in slices of `SLICE` characters. The standard encoder gives each string whole, which for a result of one
    huge string is a second copy of it just to measure it; escaping is per character, so slices escape alike."""
    if isinstance(value, str):
        if len(value) <= SLICE:
            yield json.dumps(value, ensure_ascii=False)
            return
        yield '"'
        for start in range(0, len(value), SLICE):
            yield json.dumps(value[start:start + SLICE], ensure_ascii=False)[1:-1]
        yield '"'
        return
    if isinstance(value, dict) and value:
        inner = "\n" + " " * (indent * (level + 1))
        yield "{"
        for n, (key, item) in enumerate(value.items()):
            yield ("," if n else "") + inner + json.dumps(key if isinstance(key, str) else json.dumps(key),
                                                          ensure_ascii=False) + ": "
            yield from json_chunks(item, indent, level + 1)
        yield "\n" + " " * (indent * level) + "}"
        return
    if isinstance(value, list | tuple) and value:
        inner = "\n" + " " * (indent * (level + 1))
        yield "["
        for n, item in enumerate(value):
            yield ("," if n else "") + inner
            yield from json_chunks(item, indent, level + 1)
        yield "\n" + " " * (indent * level) + "]"
        return
    yield json.dumps(value, ensure_ascii=False)
