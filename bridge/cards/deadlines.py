"""One timer for many deadlines: a heap of (when, key) and one task that wakes at the earliest.

Parked interactions (see `bridge.cards.broker`) have no task of their own to time them out, so the broker keeps their
deadlines here. Entries are never removed: when one comes due, `expire(key)` is called and decides whether the key
still means anything (an interaction decided meanwhile is simply ignored).
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable

import anyio


class Deadlines:
    def __init__(self, expire: Callable[[str], None]) -> None:
        self._expire = expire
        self._heap: list[tuple[float, str]] = []
        self._sooner = anyio.Event()

    def add(self, key: str, at: float) -> None:
        """Call `expire(key)` at wall-clock time `at` (time.time()), or at once if that has passed."""
        # Kept on the event loop's clock (as cancel scopes are), so a test's virtual clock moves it too.
        at = anyio.current_time() + (at - time.time())
        earliest = self._heap[0][0] if self._heap else None
        heapq.heappush(self._heap, (at, key))
        if earliest is None or at < earliest:
            self._sooner.set()

    def __len__(self) -> int:
        return len(self._heap)

    async def run(self) -> None:
        """Expire entries as they come due, until cancelled."""
        while True:
            now = anyio.current_time()
            while self._heap and self._heap[0][0] <= now:
                _, key = heapq.heappop(self._heap)
                self._expire(key)
            self._sooner = anyio.Event()
            delay = self._heap[0][0] - now if self._heap else None
            with anyio.move_on_after(delay):
                await self._sooner.wait()
