"""The store behind one async interface (`AsyncStore`, the union of the small roles in `api`: a module asks for the
roles it uses) with two engines: SQLite, embedded, one process (the default), and Postgres for several workers.
`open_store` picks the engine from the configured `store` value, runs the schema migrations and registers this
worker."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from bridge.storage.api import AsyncStore, Reaped
from bridge.storage.audit_keys import AuditSettings
from bridge.storage.driver import Driver
from bridge.storage.rows import AuditRow, PendingCall, RunningCall, StoredInteraction, StoredTask, Unreadable
from bridge.storage.sqlstore import SqlStore

__all__ = ["AsyncStore", "AuditRow", "PendingCall", "Reaped", "RunningCall", "SqlStore", "StoredInteraction",
           "StoredTask", "Unreadable", "default_worker_id", "is_postgres", "open_store"]

DEFAULT_LEASE = 60.0
"""Seconds a worker stays alive on record without a heartbeat."""


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def is_postgres(target: str | Path) -> bool:
    return str(target).startswith(("postgresql://", "postgres://"))


async def open_store(target: str | Path, *, worker_id: str | None = None, lease: float = DEFAULT_LEASE,
                     pool_size: int = 10, audit: AuditSettings | None = None) -> SqlStore:
    """Open the store at `target`: a `postgresql://` URL, a SQLite file path, or `:memory:`. `audit`: the audit log's
    keys and checkpoints (none: an unkeyed chain, no checkpoints)."""
    if is_postgres(target):
        # Imported here: psycopg is an optional extra, and costs start-up time for those who do not use it.
        from bridge.storage.postgres import PostgresDriver

        driver: Driver = await PostgresDriver.open(str(target), max_size=pool_size)
    else:
        from bridge.storage.sqlite import SqliteDriver

        driver = await SqliteDriver.open(target)
    store = SqlStore(driver, worker_id or default_worker_id(), audit)
    try:
        await store.start(lease)
    except BaseException:
        await store.aclose()
        raise
    return store
