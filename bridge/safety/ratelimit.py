"""A sliding-window counter: at most N events per window, per key. Pure apart from the clock it is given.

Keys come from outside (conversations, servers, people), so the counter forgets them: a key with no event left in
the window is dropped, and at most `max_keys` are kept (the least recently used goes first). Memory is bounded by
`max_keys * limit` timestamps however many distinct keys pass through.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable

MAX_KEYS = 10_000


class RateLimiter:
    def __init__(self, limit: int, window: float = 60.0, clock: Callable[[], float] = time.monotonic,
                 max_keys: int = MAX_KEYS) -> None:
        self.limit = limit
        self.window = window
        self.max_keys = max_keys
        self._clock = clock
        # Ordered by last use: the idle ones are at the front, where `_forget` looks.
        self._events: OrderedDict[Hashable, deque[float]] = OrderedDict()

    def allow(self, key: Hashable) -> bool:
        """Count one event for `key` if it fits in the window; False (and not counted) when over the limit."""
        now = self._clock()
        self._forget(now)
        events = self._events.get(key)
        if events is None:
            events = self._events[key] = deque()
        else:
            self._events.move_to_end(key)
        while events and now - events[0] >= self.window:
            events.popleft()
        if len(events) >= self.limit:
            return False
        events.append(now)
        while len(self._events) > self.max_keys:
            self._events.popitem(last=False)
        return True

    def __len__(self) -> int:
        """How many keys are remembered."""
        return len(self._events)

    def _forget(self, now: float) -> None:
        """Drop keys whose every event has left the window (amortised O(1): each key is dropped once)."""
        while self._events:
            key, events = next(iter(self._events.items()))
            if events and now - events[-1] < self.window:
                return
            del self._events[key]
