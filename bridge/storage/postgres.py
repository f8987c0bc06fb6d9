"""The Postgres engine: psycopg 3 async with its connection pool, for several bridge workers on one database.

- Claims are one atomic `UPDATE … WHERE status = 'open'` (row locks make concurrent claimers queue; the losers find
  the row no longer open), with the audit row and a `NOTIFY` in the same transaction (delivered only on commit).
- **One sync per decision**, as with SQLite: pooled sessions run `synchronous_commit = off` (a commit returns before
  its WAL record is flushed; a crash of the server can lose the last fraction of a second of such commits, never
  corrupt anything); a claim's transaction turns it back on, and flushing its commit record flushes the WAL up to
  it, so every earlier commit is durable too.
- Notifications and leadership each hold a dedicated connection outside the pool (a session-level `LISTEN` or
  advisory lock must stay on one session).
- psycopg errors are translated to `StoreError` here, once; the URL's password never reaches a message.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from functools import lru_cache
from typing import Any

import anyio
import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from bridge.errors import StoreError
from bridge.observe import hooks as observe
from bridge.storage.api import Lease
from bridge.storage.driver import SKIPPED, Dialect, Done, Row, Step, skipped

logger = logging.getLogger(__name__)

Connection = psycopg.AsyncConnection[tuple[Any, ...]]


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
        with anyio.CancelScope(shield=True):
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
        async with self._connection() as conn:
            # Shielded once sent: psycopg closes a connection whose query is cancelled midway, and the pool then has
            # to open another (a read takes milliseconds; cancelling it saves nothing).
            with anyio.CancelScope(shield=True):
                cur = await conn.execute(_pg(sql), tuple(params))
                rows = await cur.fetchall()
        return rows

    async def transaction(self, steps: Sequence[Step], *, durable: bool = False) -> list[Done]:
        # Shielded: a write, once sent, finishes and reports, so a cancelled caller never half-knows its outcome.
        started = time.perf_counter()
        with anyio.CancelScope(shield=True):
            async with self._connection() as conn:
                if len(steps) == 1 and not durable:
                    done = [await _run(conn, steps[0], [])]  # autocommit: one round trip
                else:
                    # BEGIN by hand: with the durable setting in the same round trip (a claim's eight round trips to
                    # a process on the same cores were most of its cost).
                    await conn.execute("BEGIN; SET LOCAL synchronous_commit TO on" if durable else "BEGIN")
                    try:
                        done = await _run_steps(conn, steps)
                    except BaseException:
                        await _rollback(conn)
                        raise
                    await conn.execute("COMMIT")
        if durable and any(d.count > 0 for d in done):
            self.durable_commits += 1
        observe.store_committed(started)
        return done

    async def write_behind(self, steps: Sequence[Step]) -> None:
        """Awaited here: a pooled connection has no hop to save, and a later transaction may run on another one."""
        try:
            await self.transaction(steps)
        except StoreError as exc:
            logger.error("a store write nobody waited on failed: %s", exc)

    async def flush(self) -> None:
        """Nothing is written behind here."""

    async def upkeep(self) -> None:
        await anyio.sleep_forever()

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
    cur = await conn.execute(_pg(step.sql), step.values(before))
    if cur.description is not None:
        rows = await cur.fetchall()
        return Done(rows, len(rows))
    return Done([], cur.rowcount)


async def _rollback(conn: Connection) -> None:
    """After a failed step: a broken connection has nothing to roll back (the pool discards it)."""
    if not conn.closed:
        try:
            await conn.execute("ROLLBACK")
        except psycopg.Error as exc:
            logger.debug("rollback failed: %s", exc)


async def _run_steps(conn: Connection, steps: Sequence[Step]) -> list[Done]:
    out: list[Done] = []
    for step in steps:
        out.append(SKIPPED if skipped(step, out) else await _run(conn, step, out))
    return out


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
