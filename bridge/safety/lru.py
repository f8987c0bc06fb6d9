"""A least-recently-used cache bounded by the bytes of what it holds, not by a count: twenty 5 MB entries must not pin
100 MB because a count of 256 allowed them. Pure and synchronous; each entry's cost is given by the caller."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class ByteLRU(Generic[K, V]):
    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._used = 0

    @property
    def used(self) -> int:
        """Bytes held now (the sum of the costs given)."""
        return self._used

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry[0]

    def put(self, key: K, value: V, cost: int) -> None:
        """Keep `value`; older entries go until everything fits. An entry larger than the whole budget is not kept."""
        self.discard(key)
        if cost > self.budget:
            return
        self._entries[key] = (value, cost)
        self._used += cost
        while self._used > self.budget:
            _, (_, dropped) = self._entries.popitem(last=False)
            self._used -= dropped

    def discard(self, key: K) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._used -= entry[1]

    def resize(self, budget: int) -> None:
        self.budget = budget
        while self._used > self.budget and self._entries:
            _, (_, dropped) = self._entries.popitem(last=False)
            self._used -= dropped
