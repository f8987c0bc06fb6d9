"""Lists follow nextCursor to the end, and stop when a server hands out cursors forever."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from bridge.servers.catalog import MAX_PAGES, paginate

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]


async def test_every_page_is_followed() -> None:
    pages = {None: ([1, 2], "b"), "b": ([3], "c"), "c": ([4, 5], None)}

    async def fetch(cursor: str | None) -> tuple[Sequence[int], str | None]:
        return pages[cursor]

    assert await paginate(fetch) == [1, 2, 3, 4, 5]


async def test_an_endless_cursor_is_cut_off() -> None:
    calls = 0

    async def fetch(cursor: str | None) -> tuple[Sequence[int], str | None]:
        nonlocal calls
        calls += 1
        return [calls], "again"

    assert len(await paginate(fetch)) == MAX_PAGES == calls
