"""The SQLite engine: one file in WAL mode, one process (a lock), writes off the event loop with group commit.

- **Off the event loop.** Statements run in worker threads (`anyio.to_thread`), so the loop only waits; reads have
  their own connection (WAL lets them proceed while a commit is being synced), writes go through one connection, one
  batch at a time. Plain anyio: it runs on asyncio and on trio.
- **Group commit.** Writers queue their jobs; whoever finds no batch in flight commits everything queued (each job
  in its own savepoint: a failing job is rolled back alone) while later writers queue behind it, then the next takes
  its turn. A burst of clicks costs a few commits, not one each.
- **One sync per decision.** The connection runs `synchronous=NORMAL`: commits are safe against a crash of the process
  but reach the disk only at checkpoints. A batch that carries a decision (`durable=True`) commits with
  `synchronous=FULL`, which syncs the WAL; the WAL is replayed as a prefix, so that sync makes every earlier commit
  durable too. `durable_commits` counts the synced commits that wrote something, for tests and benches.
- **Write-behind** for bookkeeping nobody waits on (a running call's record and its end, a card's reference, a 2026
  call's round, which its first card's interaction must find in the same commit or be refused):
  queued without waiting, committed with the next batch, before any later write's commit and before any read, and
  within `BEHIND` seconds by `upkeep` otherwise. A crash can lose the last `BEHIND` seconds of them, as a power loss
  can lose unsynced commits; never a decision. Each hop to the writer thread costs more than the statement it runs.
- A write, once queued, runs to the end even if the task that asked is cancelled (its wait is shielded), so a caller
  never has to guess whether a half-cancelled write happened.
- `:memory:` (tests, `call`) has no disk to wait for: its statements take microseconds and run on the event loop
  at once, without a queue or a yield (like an uncontended lock). No thread is involved, so a virtual clock (trio's
  `MockClock` that jumps when every task is blocked) never mistakes a store call for idleness.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from bridge.errors import StoreError
from bridge.observe import hooks as observe
from bridge.storage.api import Lease
from bridge.storage.driver import SKIPPED, Dialect, Done, Row, Step, skipped
from bridge.storage.lock import ProcessLock

logger = logging.getLogger(__name__)

MAX_BATCH = 128
"""Jobs committed together at most: bounds how long the first of a burst waits for the last."""

MEMORY = ":memory:"

BEHIND = 0.05
"""Seconds a write-behind job waits at most for a batch to carry it."""


@dataclass(slots=True)
class _Job:
    steps: Sequence[Step]
    durable: bool
    behind: bool = False
    result: list[Done] | Exception | None = None


def _connect(path: str) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA busy_timeout=5000")
    return db


def _connections(path: str) -> tuple[sqlite3.Connection, sqlite3.Connection | None]:
    """The writer's connection, and the readers' (`:memory:` is private to its connection: reads then go through
    the writer)."""
    writer = _connect(path)
    if path == MEMORY:
        return writer, None
    reader = _connect(path)
    reader.execute("PRAGMA query_only=ON")
    return writer, reader


def _run_steps(db: sqlite3.Connection, steps: Sequence[Step]) -> list[Done]:
    out: list[Done] = []
    for step in steps:
        # `skipped` and `Step.values` spelled out for the usual step (unguarded, fixed parameters): this runs for
        # every statement of every decision, and the two calls were a tenth of the store's Python work.
        if step.guarded and skipped(step, out):
            done = SKIPPED
        else:
            params = step.params
            cur = db.execute(step.sql, step.values(out) if callable(params) else params)
            if cur.description is not None:
                rows: list[Row] = cur.fetchall()
                done = Done(rows, len(rows))
            else:
                done = Done([], cur.rowcount)
        out.append(done)
    return out


def _translate(exc: Exception) -> Exception:
    return StoreError(f"SQLite: {exc}") if isinstance(exc, sqlite3.Error) else exc


class SqliteDriver:
    """The `Driver` for one SQLite file (or `:memory:`, for tests and `call`). Open with `await SqliteDriver.open()`."""

    dialect: Dialect = "sqlite"
    exclusive = True

    def __init__(self, path: str, lock: ProcessLock | None, writer: sqlite3.Connection,
                 reader: sqlite3.Connection | None) -> None:
        self.path = path
        self._lock = lock
        self._writer_db = writer
        self._reader_db = reader
        self._read_limiter = anyio.CapacityLimiter(1)
        self._queued: list[_Job] = []
        self._committing = False
        self._committed = anyio.Event()
        self._last_behind: _Job | None = None
        self._closed = False
        self.durable_commits = 0
        self.commits = 0

    @classmethod
    async def open(cls, path: str | Path) -> SqliteDriver:
        """Lock the file (a second process gets `StoreLocked`), then connect, off the event loop."""
        name = str(path)
        lock = None
        if name != MEMORY:
            Path(name).parent.mkdir(parents=True, exist_ok=True)
            lock = ProcessLock.acquire(Path(name))
        try:
            if name == MEMORY:
                writer, reader = _connections(name)
            else:
                writer, reader = await anyio.to_thread.run_sync(_connections, name)
        except BaseException as exc:
            if lock is not None:
                lock.release()
            if isinstance(exc, sqlite3.Error):
                raise StoreError(f"cannot open the store {name}: {exc}") from exc
            raise
        return cls(name, lock, writer, reader)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            while self._committing or self._queued:  # what was asked for before closing is still written
                await self._take_turn()
            if self.path == MEMORY:
                self._close_connections()
            else:
                async with self._read_limiter:
                    await anyio.to_thread.run_sync(self._close_connections)
        if self._lock is not None:
            self._lock.release()

    def _close_connections(self) -> None:
        if self._reader_db is not None:
            self._reader_db.close()
        self._writer_db.close()  # the last connection: SQLite checkpoints the WAL into the file

    # -- the driver interface ----------------------------------------------------------------------------------------

    async def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        self._check_open()
        if self._reader_db is None:
            try:  # `:memory:`: on the loop, without a transaction (see `transaction`)
                return _run_steps(self._writer_db, [Step(sql, params)])[0].rows
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite: {exc}") from exc
        await self.flush()  # a read sees the write-behind jobs asked for before it
        reader = self._reader_db
        try:
            return await anyio.to_thread.run_sync(lambda: reader.execute(sql, tuple(params)).fetchall(),
                                                  limiter=self._read_limiter)
        except sqlite3.Error as exc:
            raise StoreError(f"SQLite: {exc}") from exc

    async def transaction(self, steps: Sequence[Step], *, durable: bool = False) -> list[Done]:
        self._check_open()
        started = time.perf_counter()
        job = _Job(steps, durable)
        if self.path == MEMORY:
            # Nothing to wait for and nothing in flight (a memory batch never awaits): run it now. No yield either,
            # like an uncontended lock: a pass of the event loop per statement was a sixth of a round trip.
            self._commit(self._writer_db, [job])
            return _outcome(job, started)
        self._queued.append(job)
        with anyio.CancelScope(shield=True):
            while job.result is None:
                await self._take_turn()
        return _outcome(job, started)

    async def write_behind(self, steps: Sequence[Step]) -> None:
        self._check_open()
        job = _Job(steps, False, behind=True)
        if self.path == MEMORY:
            self._commit(self._writer_db, [job])
            if isinstance(job.result, Exception):
                _report_behind([job])
        else:
            self._queued.append(job)
            self._last_behind = job

    async def flush(self) -> None:
        if self._last_behind is not None and self._last_behind.result is None:
            await self._settle(self._last_behind)

    async def upkeep(self) -> None:
        """Commit write-behind jobs no other write carried within `BEHIND` seconds. Runs until cancelled."""
        while True:
            await anyio.sleep(BEHIND)
            if self._queued and not self._committing:
                await self._settle(self._queued[-1])

    async def _settle(self, job: _Job) -> None:
        """Wait until `job` (and so everything queued before it) is committed."""
        with anyio.CancelScope(shield=True):
            while job.result is None:
                await self._take_turn()

    async def _take_turn(self) -> None:
        """Commit what is queued, or, while another batch is in flight, wait for it to end."""
        if self._committing:
            await self._committed.wait()
            return
        self._committing = True
        batch, self._queued = self._queued[:MAX_BATCH], self._queued[MAX_BATCH:]
        try:
            await anyio.to_thread.run_sync(self._commit, self._writer_db, batch)
        finally:
            for job in batch:
                if job.result is None:  # the commit itself was interrupted
                    job.result = StoreError("the store write was interrupted")
            _report_behind(batch)
            self._committing = False
            committed, self._committed = self._committed, anyio.Event()
            committed.set()

    @asynccontextmanager
    async def listen(self, channel: str) -> AsyncIterator[AsyncIterator[str]]:
        """Nothing to hear: this process is the only one deciding."""
        yield _never()

    @asynccontextmanager
    async def leadership(self, name: str, retry: float) -> AsyncIterator[Lease]:
        """Always the leader: the process lock already makes this the only process."""
        yield Lease(name, anyio.Event())

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("the store is closed")

    # -- in a worker thread, one batch at a time ---------------------------------------------------------------

    def _commit(self, db: sqlite3.Connection, batch: list[_Job]) -> None:
        durable = batch[0].durable if len(batch) == 1 else any(job.durable for job in batch)  # mostly one job
        sync = durable and self.path != MEMORY  # `:memory:` has no disk to sync
        # A batch of one needs no savepoint: its job failing rolls back the whole batch, which is the job. A single
        # statement alone needs no explicit transaction either: SQLite runs it in one of its own (autocommit).
        alone = len(batch) == 1
        explicit = not (alone and len(batch[0].steps) == 1 and not batch[0].steps[0].guarded)
        results: list[list[Done] | Exception] = []
        try:
            if sync:
                db.execute("PRAGMA synchronous=FULL")
            if explicit:
                db.execute("BEGIN IMMEDIATE")
            before = db.total_changes
            for job in batch:
                if not alone:
                    db.execute("SAVEPOINT job")
                try:
                    results.append(_run_steps(db, job.steps))
                except Exception as exc:  # noqa: BLE001 - the job's own failure goes to its caller; the batch goes on
                    if db.in_transaction:  # a statement alone was rolled back by SQLite already
                        db.execute("ROLLBACK" if alone else "ROLLBACK TO job")
                    results.append(_translate(exc))
                if not alone:
                    db.execute("RELEASE job")
            if db.in_transaction:
                db.execute("COMMIT")
            if not (alone and isinstance(results[0], Exception)):  # something was committed
                self.commits += 1
                if durable and db.total_changes != before:
                    self.durable_commits += 1
        except Exception as exc:  # noqa: BLE001 - every caller of the batch hears of it; the writer stays up
            logger.error("store commit failed: %s", exc)
            if db.in_transaction:
                db.execute("ROLLBACK")
            results = [_translate(exc)] * len(batch)
        finally:
            if sync:
                db.execute("PRAGMA synchronous=NORMAL")
        for job, result in zip(batch, results, strict=True):
            job.result = result


def _report_behind(batch: list[_Job]) -> None:
    """Nobody waits on a write-behind job: its failure is logged."""
    for job in batch:
        if job.behind and isinstance(job.result, Exception):
            logger.error("a store write nobody waited on failed: %s", job.result)


def _outcome(job: _Job, started: float) -> list[Done]:
    result = job.result
    if isinstance(result, Exception):
        raise result
    assert result is not None  # set by the commit that ran the job
    observe.store_committed(started)
    return result


async def _never() -> AsyncIterator[str]:
    await anyio.sleep_forever()
    yield ""  # never reached: makes this an async generator
