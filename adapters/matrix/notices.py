"""A throttle for the notices the bot sends on its own (refusals, hints, room warnings).

Matrix has no ephemeral messages, so every notice is visible to the whole room; a person hammering a card they may
not answer must not make the bot flood it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable


class Throttle:
    """Allows one thing per key per `interval` seconds."""

    def __init__(self, interval: float, clock: Callable[[], float] = time.monotonic, max_keys: int = 4096) -> None:
        self.interval = interval
        self._clock = clock
        self._last: dict[Hashable, float] = {}
        self._max_keys = max_keys

    def allow(self, key: Hashable) -> bool:
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self.interval:
            return False
        if len(self._last) >= self._max_keys:
            # Forget what is too old to matter, so a long-running bot's memory stays bounded.
            self._last = {k: t for k, t in self._last.items() if now - t < self.interval}
        self._last[key] = now
        return True
