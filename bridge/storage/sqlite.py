"""The SQLite engine: one file in WAL mode, one process (a lock), writes off the event loop with group commit.

- **Off the event loop.** Writes run in the driver's own writer thread (started by `open`, stopped and joined by
  `aclose`), reads in a worker thread (`anyio.to_thread`) on their own connection (WAL lets them proceed while a
  commit is being synced). Plain anyio: it runs on asyncio and on trio.
- **The hop to the writer** is what a decision pays beyond its commit, so it is kept to the minimum: a writer hands its
  job to the thread through a `queue.SimpleQueue` and waits on an event; the thread wakes the event loop once per
  batch (`AsyncBackend.run_sync_soon` of the loop's `anyio.lowlevel.current_token()`: the loop's own
  thread-safe "call soon", without waiting for it). `anyio.to_thread` per batch cost twice as much (its pool, its
  limiter, a future per call), and `anyio.from_thread.run_sync` blocks the writer until the loop has run the wake-up.
  So a file store is used from the event loop that opened it (as every store is, by the one task group that owns it).
- **Group commit.** The thread takes whatever is queued (up to about `MAX_BATCH` jobs) and commits it as one
  transaction, each job in its own savepoint (a failing job is rolled back alone); what queues while a batch is being
  synced is the next batch. A burst of clicks costs a few commits, not one each.
- **One sync per decision.** The connection runs `synchronous=NORMAL`: commits are safe against a crash of the process
  but reach the disk only at checkpoints. A batch that carries a decision (`durable=True`) commits with
  `synchronous=FULL`, which syncs the WAL; the WAL is replayed as a prefix, so that sync makes every earlier commit
  durable too. `durable_commits` counts the synced commits that wrote something, for tests and benches. (Switching
  `synchronous` around that commit costs two statements of about a microsecond each; syncing the WAL file by hand or
  keeping a second connection at FULL would save them by depending on SQLite's file layout or re-reading pages.)
- **Checkpoints off the decision's path.** SQLite's own checkpoint (every 1000 WAL pages) runs inside whichever commit
  crosses the line, syncing the database file on that decision's path. It is off (`wal_autocheckpoint=0`); the
  writer thread checkpoints when the WAL holds about `WAL_LIMIT` bytes and nothing is queued, and then restarts the
  WAL at once with a one-page write (the first commit of a restarted WAL syncs its header: that sync is paid there,
  not by the next decision). Python's `sqlite3` cannot tell how many pages the WAL holds (no WAL hook), so the thread
  counts its commits and learns their pages from each checkpoint's report. The WAL file keeps its size across
  restarts: a commit that overwrites pages in place syncs faster than one that extends the file (which also syncs
  the file's size). Past `4 x WAL_LIMIT` (a load that never leaves the queue empty, or larger commits than counted)
  it checkpoints even with writes waiting, and `journal_size_limit` gives that space back at the next restart.
- **Write-behind** for bookkeeping nobody waits on (a running call's record and its end, a card's reference, a 2026
  call's round, which its first card's interaction must find in the same commit or be refused):
  kept on the loop without a hop, handed to the writer with the next write, before any read, and within `BEHIND`
  seconds by `upkeep` otherwise. A crash can lose the last `BEHIND` seconds of them, as a power loss can lose unsynced
  commits; never a decision.
- A write, once queued, runs to the end even if the task that asked is cancelled (its wait is shielded, and the
  thread commits whatever it was handed), so a caller never has to guess whether a half-cancelled write happened.
- `:memory:` (tests, `call`) has no disk to wait for: its statements take microseconds and run on the event loop
  at once, without a queue or a yield (like an uncontended lock). No thread is involved, so a virtual clock (trio's
  `MockClock` that jumps when every task is blocked) never mistakes a store call for idleness.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel

from bridge.errors import StoreError
from bridge.observe import hooks as observe
from bridge.storage.api import Lease
from bridge.storage.driver import SKIPPED, Dialect, Done, Row, Step, skipped
from bridge.storage.lock import ProcessLock

logger = logging.getLogger(__name__)

MAX_BATCH = 128
"""Jobs committed together at most (about: a write comes with the write-behind jobs queued before it): bounds how
long the first of a burst waits for the last."""

MEMORY = ":memory:"

BEHIND = 0.05
"""Seconds a write-behind job waits at most for a batch to carry it."""

WAL_LIMIT = 4 * 1024 * 1024
"""Bytes of WAL past which the writer checkpoints when idle (SQLite's own default is 1000 pages, about as much)."""

FRAME = 4096 + 24
"""Bytes of WAL per page written (SQLite's default page size, and the frame's header)."""


@dataclass(slots=True, eq=False)
class _Job:
    steps: Sequence[Step]
    durable: bool
    behind: bool = False
    result: list[Done] | Exception | None = None
    """Set by the writer thread; the job is committed (or failed) once it is set."""
    done: anyio.Event | None = None
    """Set on the event loop after `result`, for whoever waits on the job (created by the first to wait)."""


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
    writer.execute("PRAGMA wal_autocheckpoint=0")  # the writer thread checkpoints between decisions (`_keep_wal`)
    writer.execute(f"PRAGMA journal_size_limit={4 * WAL_LIMIT}")
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
        self._jobs: queue.SimpleQueue[list[_Job] | None] = queue.SimpleQueue()
        self._behind: list[_Job] = []  # write-behind jobs not yet handed to the writer
        self._last_behind: _Job | None = None
        self._thread: threading.Thread | None = None
        self._token: anyio.lowlevel.EventLoopToken | None = None
        self._closed = False
        self.durable_commits = 0
        self.commits = 0
        self.checkpoints = 0
        self._commits_since_restart = 0  # the writer thread's: what the WAL holds, counted in commits
        self._pages_per_commit = 8.0  # learned from each checkpoint; guessed high at first, to checkpoint early

    @classmethod
    async def open(cls, path: str | Path) -> SqliteDriver:
        """Lock the file (a second process gets `StoreLocked`), then connect, off the event loop, and start the
        writer thread."""
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
        driver = cls(name, lock, writer, reader)
        if reader is not None:
            driver._start_writer()
        return driver

    def _start_writer(self) -> None:
        self._token = anyio.lowlevel.current_token()  # the loop the thread wakes: the one that opened the store
        # A daemon only so that a store never closed cannot keep the process from exiting; `aclose` joins it.
        self._thread = threading.Thread(target=self._write, name=f"sqlite writer {self.path}", daemon=True)
        self._thread.start()

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            if self._thread is None:  # `:memory:`
                self._writer_db.close()
            else:
                self._hand_over_behind()  # what was asked for before closing is still written
                reader = self._reader_db
                if reader is not None:
                    async with self._read_limiter:
                        await anyio.to_thread.run_sync(reader.close)
                # Behind everything queued: the thread commits it all, then closes the last connection (SQLite
                # checkpoints the WAL into the file) and ends.
                self._jobs.put(None)
                await anyio.to_thread.run_sync(self._thread.join)
        if self._lock is not None:
            self._lock.release()

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
        if self._thread is None:
            # `:memory:`: nothing to wait for and nothing in flight (a memory batch never awaits): run it now. No
            # yield either, like an uncontended lock: a pass of the event loop per statement was a sixth of a round
            # trip.
            self._commit(self._writer_db, [job])
            return _outcome(job, started)
        behind = self._behind
        if behind:  # ahead of this job, in the same item: the thread commits them in order, in one batch
            self._behind = []
            behind.append(job)
            self._jobs.put(behind)
        else:
            self._jobs.put([job])
        await _settle(job)
        return _outcome(job, started)

    async def write_behind(self, steps: Sequence[Step]) -> None:
        self._check_open()
        job = _Job(steps, False, behind=True)
        if self._thread is None:
            self._commit(self._writer_db, [job])
            if isinstance(job.result, Exception):
                _report_behind([job])
        else:
            self._behind.append(job)
            self._last_behind = job

    async def flush(self) -> None:
        last = self._last_behind
        if last is not None and last.result is None:
            self._hand_over_behind()
            await _settle(last)

    async def upkeep(self) -> None:
        """Commit write-behind jobs no other write carried within `BEHIND` seconds. Runs until cancelled."""
        while True:
            await anyio.sleep(BEHIND)
            await self.flush()

    def _hand_over_behind(self) -> None:
        if self._behind:
            self._jobs.put(self._behind)
            self._behind = []

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

    # -- in the writer thread ----------------------------------------------------------------------------------------

    def _write(self) -> None:
        """Batches back to back until `aclose` queues the end: whatever queued while one was committed is the next."""
        jobs, db = self._jobs, self._writer_db
        wal = self.path + "-wal"
        ending = False
        while not ending:
            batch = jobs.get()
            if batch is None:
                break
            while len(batch) < MAX_BATCH:
                try:
                    more = jobs.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    ending = True
                    break
                batch.extend(more)  # each item is the thread's once queued: nothing on the loop holds it
            try:
                self._commit(db, batch)
            except Exception as exc:  # noqa: BLE001 - the batch's callers hear of it; the writer stays up
                logger.error("store commit failed: %s", exc)
                for job in batch:
                    if job.result is None:
                        job.result = StoreError(f"the store write was interrupted: {exc}")
            _report_behind(batch)  # before the wake-up: whoever waited on the batch finds its failures logged
            self._wake(batch)
            if not ending:
                self._keep_wal(db, wal, idle=jobs.empty())
        try:
            db.close()  # the last connection: SQLite checkpoints the WAL into the file
        except sqlite3.Error as exc:
            logger.error("closing the store failed: %s", exc)

    def _wake(self, batch: list[_Job]) -> None:
        """Wake the batch's waiters: one call onto the loop per batch, which the thread does not wait for."""
        token = self._token
        assert token is not None  # set before the thread starts
        with contextlib.suppress(anyio.RunFinishedError):  # the loop ended without closing the store: no waiter
            token.backend_class.run_sync_soon(_set_done, (batch,), token.native_token)

    def _keep_wal(self, db: sqlite3.Connection, wal: str, *, idle: bool) -> None:
        """Checkpoint when the WAL holds about `WAL_LIMIT` bytes and no write is waiting (past four times that, even
        then, so that it stays bounded under a load that never pauses)."""
        self._commits_since_restart += 1
        held = self._commits_since_restart * self._pages_per_commit * FRAME
        if held < WAL_LIMIT or (not idle and held < 4 * WAL_LIMIT):
            try:  # more pages per commit than learned so far: the file tells (it grows once the WAL passes its size)
                if os.stat(wal).st_size <= 4 * WAL_LIMIT:
                    return
            except OSError:
                return
        try:
            _, frames, copied = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            if frames == copied:
                # All of it is in the database file: the next write starts the WAL over and syncs its new header.
                # A one-page write (the header's own value, unchanged) does that now, instead of the next decision.
                version = int(db.execute("PRAGMA user_version").fetchone()[0])
                db.execute(f"PRAGMA user_version={version}")
                self._pages_per_commit = max(1.0, frames / self._commits_since_restart)
                self._commits_since_restart = 0
        except sqlite3.Error as exc:  # tried again after the next commit
            logger.warning("store checkpoint failed: %s", exc)
        self.checkpoints += 1

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


async def _settle(job: _Job) -> None:
    """Wait until `job` (and so everything queued before it) is committed. Shielded: a write once queued runs to
    its end, and its caller hears how it ended."""
    if job.result is None:
        if job.done is None:  # none yet: `_set_done` runs on this loop, so it cannot have passed this job by
            job.done = anyio.Event()
        with anyio.CancelScope(shield=True):
            await job.done.wait()


def _set_done(batch: list[_Job]) -> None:
    """On the event loop: the writer thread has committed `batch`."""
    for job in batch:
        if job.done is not None:
            job.done.set()


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
