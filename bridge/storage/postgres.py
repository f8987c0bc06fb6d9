"""The Postgres engine: psycopg 3 async with its connection pool, for several bridge workers on one database.

- Claims are one atomic `UPDATE … WHERE status = 'open'` (row locks make concurrent claimers queue; the losers find
  the row no longer open), with the audit row and a `NOTIFY` in the same transaction (delivered only on commit).
- **One sync per decision**, as with SQLite: pooled sessions run `synchronous_commit = off` (a commit returns before
  its WAL record is flushed; a crash of the server can lose the last fraction of a second of such commits, never
  corrupt anything); a claim's transaction turns it back on, and flushing its commit record flushes the WAL up to
  it, so every earlier commit is durable too.
- **Round trips.** A transaction goes out in psycopg's pipeline mode: BEGIN (with the durable setting), its steps and
  COMMIT are sent together, and the client waits for the server only where a step needs an earlier one's outcome (a
  guarded step its job's first count, parameters made from the rows before). Each statement was a round trip to a
  server process on the same cores; a claim now takes three, a transaction of independent steps one.
- **Write-behind** for bookkeeping nobody waits on (a running call's record and its end, a card shown final, a 2026
  call's round; not a card's reference, which another worker may need at the next click), as with SQLite: queued without
  a round trip; a transaction that follows at once carries them in front of its own steps (a 2026 round and its first
  card: one commit), else `upkeep` commits them in batches in the background (those queued while a batch is in flight
  make the next), so that other workers see them within a round trip or so. A later transaction or read of this process
  starts only once those queued before it are committed (a card's row needs its round's, a read must see them); closing
  commits the rest. A crash of the process can lose the last of them, never a decision (a claim is its own synced
  transaction).
- Notifications and leadership each hold a dedicated connection outside the pool (a session-level `LISTEN` or
  advisory lock must stay on one session).
- psycopg errors are translated to `StoreError` here, once; the URL's password never reaches a message.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from functools import lru_cache
from typing import Any

import anyio
import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from bridge.errors import StoreError
from bridge.observe import hooks as observe
from bridge.storage.api import Lease
from bridge.storage.driver import SKIPPED, Dialect, Done, Row, Step, skipped

logger = logging.getLogger(__name__)

Connection = psycopg.AsyncConnection[tuple[Any, ...]]
Cursor = psycopg.AsyncCursor[tuple[Any, ...]]

_SCHEMA_CHANGE = re.compile(r"\s*(CREATE|ALTER|DROP)\b", re.IGNORECASE).match

MAX_BATCH = 128
"""Jobs written behind committed together at most."""


@lru_cache(maxsize=256)
def _pg(statement: str) -> str:
    """The store writes `?` placeholders; psycopg wants `%s` (and a literal `%` doubled)."""
    return statement.replace("%", "%%").replace("?", "%s")


def where(url: str) -> str:
    """The database a URL names, for messages: host and name, never the password."""
    try:
        info = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "the configured Postgres store"
    return f"postgres database {info.get('dbname', '?')} on {info.get('host', 'localhost')}"


def lock_key(name: str) -> int:
    """A stable signed 64-bit advisory lock key for a role name."""
    return int.from_bytes(hashlib.blake2b(f"mcp-chat-bridge:{name}".encode(), digest_size=8).digest(), "big",
                          signed=True)


def _say(exc: BaseException) -> str:
    """An error in one line (libpq adds hints on lines of their own)."""
    return " ".join(str(exc).split())


async def _configure(conn: Connection) -> None:
    await conn.execute("SET synchronous_commit TO off")


class PostgresDriver:
    """The `Driver` for a Postgres database. Open with `await PostgresDriver.open(url)`."""

    dialect: Dialect = "postgres"
    exclusive = False

    def __init__(self, url: str, pool: AsyncConnectionPool[Connection]) -> None:
        self._url = url
        self._pool = pool
        self.durable_commits = 0
        self.commits = 0
        """Transactions committed (a batch of jobs written behind is one), for tests and benches."""
        self._queued: list[Sequence[Step]] = []
        self._asked = 0
        """Jobs written behind so far; `_written` of them are committed (or failed), in the order asked."""
        self._written = 0
        self._behind: anyio.Event | None = None
        """Set when the batch of jobs written behind that is in flight ends."""
        self._wake = anyio.Event()
        self._closed = False

    @classmethod
    async def open(cls, url: str, *, min_size: int = 1, max_size: int = 10, wait: float = 15.0) -> PostgresDriver:
        # One plain connection first: a wrong URL, password or database fails at once with the server's reason,
        # where the pool would keep retrying until its timeout.
        try:
            probe = await psycopg.AsyncConnection.connect(url)
        except psycopg.Error as exc:
            raise StoreError(f"cannot reach the {where(url)}: {_say(exc)}") from exc
        await probe.close()
        pool: AsyncConnectionPool[Connection] = AsyncConnectionPool(
            url, min_size=min_size, max_size=max_size, open=False, timeout=wait, configure=_configure,
            kwargs={"autocommit": True}, name="mcp-chat-bridge-store")
        try:
            await pool.open(wait=True, timeout=wait)
        except (PoolTimeout, psycopg.Error) as exc:
            await pool.close()
            raise StoreError(f"cannot reach the {where(url)}: {_say(exc)}") from exc
        return cls(url, pool)

    async def aclose(self) -> None:
        if self._closed:
            return
        with anyio.CancelScope(shield=True):
            try:
                await self.flush()  # what was written behind before closing is still committed
            finally:
                self._closed = True
                await self._pool.close()

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[Connection]:
        try:
            async with self._pool.connection() as conn:
                yield conn
        except PoolTimeout as exc:
            raise StoreError(f"no connection to the {where(self._url)}: {_say(exc)}") from exc
        except psycopg.Error as exc:
            raise StoreError(f"Postgres: {_say(exc)}") from exc

    async def _connect(self) -> Connection:
        try:
            return await psycopg.AsyncConnection.connect(self._url, autocommit=True)
        except psycopg.Error as exc:
            raise StoreError(f"cannot reach the {where(self._url)}: {_say(exc)}") from exc

    # -- the driver interface ----------------------------------------------------------------------------------------

    async def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        self._check_open()
        if self._asked != self._written:
            await self.flush()  # a read sees the jobs written behind before it
        async with self._connection() as conn:
            # Shielded once sent: psycopg closes a connection whose query is cancelled midway, and the pool then has
            # to open another (a read takes milliseconds; cancelling it saves nothing).
            with anyio.CancelScope(shield=True):
                cur = await conn.execute(_pg(sql), tuple(params))
                rows = await cur.fetchall()
        return rows

    async def transaction(self, steps: Sequence[Step], *, durable: bool = False) -> list[Done]:
        self._check_open()
        started = time.perf_counter()
        carried = self._take_along(steps, durable)
        if not carried and self._asked != self._written:
            await self.flush()  # a later write commits after the jobs written behind before it
        # Shielded: a write, once sent, finishes and reports, so a cancelled caller never half-knows its outcome.
        with anyio.CancelScope(shield=True):
            done = await self._carrying(carried, steps) if carried else await self._alone(steps, durable)
        self.commits += 1
        if durable and any(d.count > 0 for d in done):
            self.durable_commits += 1
        observe.store_committed(started)
        return done

    def _take_along(self, steps: Sequence[Step], durable: bool) -> list[Sequence[Step]]:
        """The jobs written behind that this transaction carries in front of its own steps (committed with them,
        without a transaction or a round trip of their own): all those queued, when no batch is in flight. Not in
        a decision's transaction (whoever waits for the jobs would wait for its sync too), nor a schema change's."""
        if durable or self._behind is not None or not self._queued or len(self._queued) > MAX_BATCH \
                or any(_SCHEMA_CHANGE(step.sql) for step in steps):
            return []
        carried, self._queued = self._queued, []
        self._behind = anyio.Event()
        return carried

    async def _carrying(self, carried: list[Sequence[Step]], steps: Sequence[Step]) -> list[Done]:
        try:
            try:
                async with self._connection() as conn:
                    return (await _pipelined(conn, [*carried, steps], durable=False))[-1]
            except StoreError:
                # A job or this transaction failed, and rolled the rest back with it: the jobs again on their own
                # (only a failing one is lost, and logged), then this transaction alone (its failure is its caller's).
                await self._commit_each(carried)
                return await self._alone(steps, durable=False)
        finally:
            self._batch_ended(len(carried))

    async def _alone(self, steps: Sequence[Step], durable: bool) -> list[Done]:
        async with self._connection() as conn:
            if len(steps) == 1 and not durable:
                return [await _run(conn, steps[0], [])]  # autocommit: one round trip
            if any(_SCHEMA_CHANGE(step.sql) for step in steps):
                return await _one_by_one(conn, steps)
            return (await _pipelined(conn, [steps], durable))[0]

    async def write_behind(self, steps: Sequence[Step]) -> None:
        """Queued, without a round trip: carried by this process's next transaction if one starts before `upkeep`
        takes it (in front of its steps, in its commit), else committed in a batch by `upkeep`, before the next
        transaction or read starts, at `flush` or at close, whichever comes first."""
        self._check_open()
        self._queued.append(steps)
        self._asked += 1
        self._wake.set()

    async def flush(self) -> None:
        """Wait until every job written behind so far is committed (or its failure logged)."""
        target = self._asked
        with anyio.CancelScope(shield=True):
            while self._written < target:
                await self._take_turn()

    async def upkeep(self) -> None:
        """Commit the jobs written behind as they come, in the background (those queued while a batch is in flight
        make the next one), so that other workers see them soon and no later transaction waits for them. Runs until
        cancelled."""
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            await self.flush()

    async def _take_turn(self) -> None:
        """Commit what is queued behind, in one transaction; or, while another batch is in flight, wait for it."""
        if self._behind is not None:
            await self._behind.wait()
            return
        batch, self._queued = self._queued[:MAX_BATCH], self._queued[MAX_BATCH:]
        self._behind = anyio.Event()
        try:
            try:
                await self._commit(batch)
            except StoreError as exc:
                if len(batch) == 1:
                    logger.error("a store write nobody waited on failed: %s", exc)
                else:  # one failing job rolled its whole batch back: each again on its own, so only that one is lost
                    await self._commit_each(batch)
        finally:
            self._batch_ended(len(batch))

    def _batch_ended(self, jobs: int) -> None:
        assert self._behind is not None
        self._written += jobs
        ended, self._behind = self._behind, None
        ended.set()

    async def _commit_each(self, jobs: list[Sequence[Step]]) -> None:
        for job in jobs:
            try:
                await self._commit([job])
            except StoreError as exc:
                logger.error("a store write nobody waited on failed: %s", exc)

    async def _commit(self, jobs: list[Sequence[Step]]) -> None:
        async with self._connection() as conn:
            await _pipelined(conn, jobs, durable=False)
        self.commits += 1

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("the store is closed")

    @asynccontextmanager
    async def listen(self, channel: str) -> AsyncIterator[AsyncIterator[str]]:
        """`LISTEN` on a connection of its own; the iterator ends with `StoreError` if that connection is lost."""
        conn = await self._connect()
        try:
            try:
                await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
            except psycopg.Error as exc:
                raise StoreError(f"Postgres LISTEN failed: {_say(exc)}") from exc
            yield _notifications(conn)
        finally:
            with anyio.CancelScope(shield=True):
                await conn.close()

    @asynccontextmanager
    async def leadership(self, name: str, retry: float) -> AsyncIterator[Lease]:
        """Hold a session-level advisory lock for `name`, waiting (in the server) until it is ours. The lock lives as
        long as its session: if that connection dies, Postgres releases it for another worker, and `lost` is set
        here within `retry` seconds (the session is checked that often)."""
        key = lock_key(name)
        conn = await self._connect()
        try:
            await _lock(conn, key)
            lease = Lease(name, anyio.Event())
            async with anyio.create_task_group() as tg:
                tg.start_soon(_keep, conn, lease, retry)
                try:
                    yield lease
                finally:
                    tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await conn.close()  # ends the session, and with it the lock


async def _run(conn: Connection, step: Step, before: list[Done]) -> Done:
    return await _outcome(await conn.execute(_pg(step.sql), step.values(before)))


async def _outcome(cur: Cursor) -> Done:
    """What a statement did: its rows, or the rows it changed."""
    if cur.description is not None:
        rows = await cur.fetchall()
        return Done(rows, len(rows))
    return Done([], cur.rowcount)


async def _pipelined(conn: Connection, jobs: Sequence[Sequence[Step]], durable: bool) -> list[list[Done]]:
    """Run the jobs' steps in one transaction, in psycopg's pipeline mode: BEGIN, the steps and COMMIT go out
    together, and the client waits for the server only where a step needs what an earlier one did (a guarded step
    its job's first count, parameters made from the rows before). A claim is three round trips, not six; a
    transaction of independent steps, or a batch of jobs written behind, one. Any failing step aborts the rest up to
    the next sync, and the whole transaction is rolled back."""
    out: list[list[Done]] = []
    try:
        async with conn.pipeline() as pipe:
            waiting: list[tuple[list[Done], int, Cursor]] = []

            async def settle(needed: bool) -> None:
                if needed and waiting:
                    await pipe.sync()
                    await _read(waiting)

            await conn.execute("BEGIN")
            if durable:
                await conn.execute("SET LOCAL synchronous_commit TO on")
            for steps in jobs:
                done: list[Done] = []
                out.append(done)
                for step in steps:
                    if callable(step.params):
                        await settle(any(w[0] is done for w in waiting))  # every step before it
                    elif step.guarded:
                        await settle(any(w[0] is done and w[1] == 0 for w in waiting))  # its job's first
                    if step.guarded and skipped(step, done):
                        done.append(SKIPPED)
                        continue
                    cur = await conn.execute(_pg(step.sql), step.values(done))
                    waiting.append((done, len(done), cur))
                    done.append(SKIPPED)  # a placeholder until read
            await conn.execute("COMMIT")
        await _read(waiting)  # the pipeline's end synced: every result is in
    except BaseException:
        await _rollback(conn)
        raise
    return out


async def _one_by_one(conn: Connection, steps: Sequence[Step]) -> list[Done]:
    """A schema change (a migration), a statement per round trip: psycopg forgets its prepared statements after
    one (a table they name may have changed), which it does in step only when each result is read as it comes (in a
    pipeline it would deallocate, a statement late, one it has just prepared)."""
    await conn.execute("BEGIN")
    try:
        done = await _run_steps(conn, steps)
    except BaseException:
        await _rollback(conn)
        raise
    await conn.execute("COMMIT")
    return done


async def _run_steps(conn: Connection, steps: Sequence[Step]) -> list[Done]:
    out: list[Done] = []
    for step in steps:
        out.append(SKIPPED if skipped(step, out) else await _run(conn, step, out))
    return out


async def _read(waiting: list[tuple[list[Done], int, Cursor]]) -> None:
    """Put each sent step's outcome in its place, once the pipeline has synced (no round trip here)."""
    for done, index, cur in waiting:
        done[index] = await _outcome(cur)
    waiting.clear()


async def _rollback(conn: Connection) -> None:
    """After a failed step: a broken connection has nothing to roll back (the pool discards it), nor has one whose
    COMMIT itself failed (the server ended that transaction)."""
    if conn.closed or conn.info.transaction_status == TransactionStatus.IDLE:
        return
    try:
        await conn.execute("ROLLBACK")
    except psycopg.Error as exc:
        logger.debug("rollback failed: %s", exc)


async def _notifications(conn: Connection) -> AsyncIterator[str]:
    try:
        async for note in conn.notifies():
            yield note.payload
    except psycopg.Error as exc:
        raise StoreError(f"lost the Postgres notification connection: {_say(exc)}") from exc


async def _lock(conn: Connection, key: int) -> None:
    """Wait until the lock is ours. Cancelled, the caller closes the connection, which drops the request."""
    try:
        await conn.execute("SELECT pg_advisory_lock(%s)", (key,))
    except psycopg.Error as exc:
        raise StoreError(f"Postgres advisory lock failed: {_say(exc)}") from exc


async def _keep(conn: Connection, lease: Lease, every: float) -> None:
    """Check the lock's session is alive; when it is not, the lock is gone: say so."""
    while True:
        await anyio.sleep(every)
        try:
            await conn.execute("SELECT 1")
        except psycopg.Error as exc:
            logger.warning("lost the lead of %s: %s", lease.name, exc)
            lease.lost.set()
            return
