"""A sliding-window counter: at most N events per window, per key. Pure apart from the clock it is given."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Hashable


class RateLimiter:
    def __init__(self, limit: int, window: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self.window = window
        self._clock = clock
        self._events: dict[Hashable, deque[float]] = {}

    def allow(self, key: Hashable) -> bool:
        """Count one event for `key` if it fits in the window; False (and not counted) when over the limit."""
        now = self._clock()
        events = self._events.setdefault(key, deque())
        while events and now - events[0] >= self.window:
            events.popleft()
        if len(events) >= self.limit:
            return False
        events.append(now)
        return True
