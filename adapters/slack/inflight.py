"""Lookups shared while in flight: concurrent callers asking for the same key wait on one call instead of each
making their own (a burst of clicks by one person is one `users.info`, a burst of first requests one `auth.test`).

Nothing is cached here: once the call returns, the next caller asks again. Callers keep what they want to keep.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import anyio

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass(eq=False)
class _Flight(Generic[V]):
    done: anyio.Event = field(default_factory=anyio.Event)
    ok: bool = False
    value: V | None = None
    error: Exception | None = None


class SharedLookups(Generic[K, V]):
    def __init__(self) -> None:
        self._flights: dict[K, _Flight[V]] = {}

    def in_flight(self, key: K) -> bool:
        return key in self._flights

    async def get(self, key: K, fetch: Callable[[], Awaitable[V]]) -> V:
        """`fetch()`'s result, shared with every caller that asks for `key` while it runs. A failure is raised to
        each of them; if the caller running `fetch` is cancelled, a waiting caller runs it again."""
        while (flight := self._flights.get(key)) is not None:
            await flight.done.wait()
            if flight.ok:
                return flight.value  # type: ignore[return-value]  # set together with ok
            if flight.error is not None:
                raise flight.error
        flight = _Flight[V]()
        self._flights[key] = flight
        try:
            flight.value = await fetch()
            flight.ok = True
            return flight.value
        except Exception as exc:
            flight.error = exc
            raise
        finally:
            del self._flights[key]
            flight.done.set()
