"""The SQLite engine: one file in WAL mode, one process (a lock), writes in one thread with group commit.

- **Off the event loop.** Writes go to a dedicated writer thread through a queue; reads run on their own connection in
  a worker thread (WAL lets them proceed while a commit is being synced). The event loop only waits.
- **Group commit.** The writer takes every job waiting in the queue and runs them in one transaction, each in its own
  savepoint (a failing job is rolled back alone), so a burst of clicks costs one commit.
- **One sync per decision.** The connection runs `synchronous=NORMAL`: commits are safe against a crash of the process
  but reach the disk only at checkpoints. A commit that carries a decision (`durable=True`) runs with
  `synchronous=FULL`, which syncs the WAL; the WAL is replayed as a prefix, so that sync makes every earlier commit
  durable too. `durable_commits` counts the synced commits that wrote something, for tests and benches.
- A write, once queued, runs to the end even if the task that asked is cancelled (its wait is shielded), so a caller
  never has to guess whether a half-cancelled write happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import sqlite3
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from bridge.errors import StoreError
from bridge.storage.api import Lease
from bridge.storage.driver import SKIPPED, Dialect, Done, Row, Step
from bridge.storage.lock import ProcessLock

logger = logging.getLogger(__name__)

MAX_BATCH = 128
"""Jobs committed together at most: bounds how long the first of a burst waits for the last."""

MEMORY = ":memory:"


@dataclass(slots=True)
class _Job:
    steps: Sequence[Step]
    durable: bool
    future: asyncio.Future[list[Done]]
    loop: asyncio.AbstractEventLoop


def _connect(path: str) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("PRAGMA busy_timeout=5000")
    return db


def _run_steps(db: sqlite3.Connection, steps: Sequence[Step]) -> list[Done]:
    out: list[Done] = []
    previous: Done | None = None
    for step in steps:
        if step.guarded and (previous is None or previous.count <= 0):
            done = SKIPPED
        else:
            cur = db.execute(step.sql, tuple(step.params))
            if cur.description is not None:
                rows: list[Row] = cur.fetchall()
                done = Done(rows, len(rows))
            else:
                done = Done([], cur.rowcount)
        out.append(done)
        previous = done
    return out


def _settle(future: asyncio.Future[list[Done]], result: list[Done] | BaseException) -> None:
    if future.done():
        return
    if isinstance(result, BaseException):
        future.set_exception(result)
    else:
        future.set_result(result)


def _translate(exc: Exception) -> Exception:
    return StoreError(f"SQLite: {exc}") if isinstance(exc, sqlite3.Error) else exc


class SqliteDriver:
    """The `Driver` for one SQLite file (or `:memory:`, for tests and `call`). Open with `await SqliteDriver.open()`."""

    dialect: Dialect = "sqlite"
    exclusive = True

    def __init__(self, path: str, lock: ProcessLock | None) -> None:
        self.path = path
        self._lock = lock
        self.durable_commits = 0
        self.commits = 0
        self._writer_db = _connect(path)
        # `:memory:` is private to its connection: reads then go through the writer too.
        self._reader_db = None if path == MEMORY else _connect(path)
        if self._reader_db is not None:
            self._reader_db.execute("PRAGMA query_only=ON")
        self._read_limiter = anyio.CapacityLimiter(1)
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._closed = False
        self._thread = threading.Thread(target=self._write_loop, name=f"store-writer {path}", daemon=True)
        self._thread.start()

    @classmethod
    async def open(cls, path: str | Path) -> SqliteDriver:
        """Lock the file (a second process gets `StoreLocked`), then connect, off the event loop."""
        name = str(path)
        lock = None
        if name != MEMORY:
            Path(name).parent.mkdir(parents=True, exist_ok=True)
            lock = ProcessLock.acquire(Path(name))
        try:
            return await anyio.to_thread.run_sync(cls, name, lock)
        except sqlite3.Error as exc:
            if lock is not None:
                lock.release()
            raise StoreError(f"cannot open the store {name}: {exc}") from exc
        except BaseException:
            if lock is not None:
                lock.release()
            raise

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._reader_db is not None:
            async with self._read_limiter:
                self._reader_db.close()
        self._jobs.put(None)
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._thread.join)
        if self._lock is not None:
            self._lock.release()

    # -- the driver interface ----------------------------------------------------------------------------------------

    async def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        if self._reader_db is None:
            return (await self.transaction([Step(sql, params)]))[0].rows
        self._check_open()
        reader = self._reader_db
        try:
            return await anyio.to_thread.run_sync(lambda: reader.execute(sql, tuple(params)).fetchall(),
                                                  limiter=self._read_limiter)
        except sqlite3.Error as exc:
            raise StoreError(f"SQLite: {exc}") from exc

    async def transaction(self, steps: Sequence[Step], *, durable: bool = False) -> list[Done]:
        self._check_open()
        loop = asyncio.get_running_loop()
        job = _Job(steps, durable, loop.create_future(), loop)
        self._jobs.put(job)
        with anyio.CancelScope(shield=True):
            done = await job.future
        return done

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

    # -- the writer thread -------------------------------------------------------------------------------------------

    def _write_loop(self) -> None:
        db = self._writer_db
        try:
            stopping = False
            while not stopping:
                job = self._jobs.get()
                if job is None:
                    break
                batch = [job]
                while len(batch) < MAX_BATCH:
                    try:
                        more = self._jobs.get_nowait()
                    except queue.Empty:
                        break
                    if more is None:
                        stopping = True
                        break
                    batch.append(more)
                self._commit(db, batch)
        finally:
            db.close()

    def _commit(self, db: sqlite3.Connection, batch: list[_Job]) -> None:
        durable = any(job.durable for job in batch)
        results: list[list[Done] | BaseException] = []
        try:
            if durable:
                db.execute("PRAGMA synchronous=FULL")
            db.execute("BEGIN IMMEDIATE")
            before = db.total_changes
            for job in batch:
                db.execute("SAVEPOINT job")
                try:
                    results.append(_run_steps(db, job.steps))
                except Exception as exc:  # noqa: BLE001 - the job's own failure goes to its caller; the batch goes on
                    db.execute("ROLLBACK TO job")
                    results.append(_translate(exc))
                db.execute("RELEASE job")
            wrote = db.total_changes != before
            db.execute("COMMIT")
            self.commits += 1
            if durable and wrote:
                self.durable_commits += 1
        except Exception as exc:  # noqa: BLE001 - every caller of the batch hears of it; the writer stays up
            logger.error("store commit failed: %s", exc)
            if db.in_transaction:
                db.execute("ROLLBACK")
            results = [_translate(exc)] * len(batch)
        finally:
            if durable:
                db.execute("PRAGMA synchronous=NORMAL")
        for job, result in zip(batch, results, strict=True):
            with contextlib.suppress(RuntimeError):  # the loop that asked has closed; nobody is waiting
                job.loop.call_soon_threadsafe(_settle, job.future, result)


async def _never() -> AsyncIterator[str]:
    await anyio.sleep_forever()
    yield ""  # never reached: makes this an async generator
