"""What an engine provides to the shared store (`bridge.storage.sqlstore`): statements and transactions.

The store writes SQL once, with `?` placeholders and syntax both SQLite (3.35+) and Postgres accept, and picks a
dialect's variant where they differ. A transaction is a short list of steps, so each engine can run it its own way
(SQLite in its writer thread, Postgres on a pooled connection) without the store holding a transaction open across
awaits.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from bridge.storage.api import Lease

Dialect = Literal["sqlite", "postgres"]
Row = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Step:
    """One statement of a transaction. `guarded`: run only if the transaction's first step touched at least one row
    (an audit row only for a claim that won). `params` may be a function of what the steps before it did (an audit
    row's hash follows the hash read just before it, in the same transaction)."""

    sql: str
    params: Sequence[Any] | Callable[[list[Done]], Sequence[Any]] = ()
    guarded: bool = False

    def values(self, before: list[Done]) -> tuple[Any, ...]:
        return tuple(self.params(before) if callable(self.params) else self.params)


@dataclass(frozen=True, slots=True)
class Done:
    """What a step did: the rows it returned (SELECT or RETURNING) and how many rows it touched."""

    rows: list[Row]
    count: int
    ran: bool = True


SKIPPED = Done([], 0, ran=False)


def skipped(step: Step, before: list[Done]) -> bool:
    """Whether a guarded step is skipped: the first step of its transaction touched nothing."""
    return step.guarded and (not before or before[0].count <= 0)


class Driver(Protocol):
    dialect: Dialect
    exclusive: bool
    """Whether this process is the only one using the store (SQLite's lock): every other worker is gone."""
    durable_commits: int

    async def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Row]: ...

    async def transaction(self, steps: Sequence[Step], *, durable: bool = False) -> list[Done]:
        """Run the steps in one transaction, in order; commit, synced to disk when `durable`. All or nothing."""
        ...

    async def write_behind(self, steps: Sequence[Step]) -> None:
        """Run the steps in a transaction the caller need not wait for: committed before any later transaction and
        any read, and soon (`upkeep`) otherwise, and at close; a failure is logged."""
        ...

    async def flush(self) -> None:
        """Commit the write-behind jobs asked for so far."""
        ...

    async def upkeep(self) -> None:
        """What the engine does in the background while the bridge runs (until cancelled)."""
        ...

    def listen(self, channel: str) -> AbstractAsyncContextManager[AsyncIterator[str]]: ...
    def leadership(self, name: str, retry: float) -> AbstractAsyncContextManager[Lease]: ...
    async def aclose(self) -> None: ...
