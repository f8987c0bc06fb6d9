"""Health and metrics on the bridge's HTTP server: `/metrics`, and the `/readyz` checks (adapters connected, store
writable).

`install` is called by `run` (and by tests, the same way) once the host and its adapters exist: it makes the
worker's `Metrics`, adds it as an observer for as long as the returned context lasts, registers the route and the
checks. `/healthz` (the process answers) is the HTTP server's own.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import anyio
from starlette.requests import Request
from starlette.responses import Response

from bridge.door.ports import Adapter
from bridge.errors import StoreError
from bridge.observe import hooks as observe
from bridge.observe.metrics import Metrics
from bridge.web.server import SECURITY_HEADERS, HttpServer, ReadinessCheck

if TYPE_CHECKING:
    from bridge.host import Host
    from bridge.storage.api import AdapterValues, StoreLife

    class ProbedStore(StoreLife, AdapterValues, Protocol):
        """What the readiness probe needs of the store: where it is, and a small value to write."""

STORE_TIMEOUT = 2.0
"""Seconds the store probe may wait for the write lock: longer, and the store counts as not writable."""
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""Prometheus's text exposition format."""


def default_worker_id() -> str:
    """The worker's name when `run --worker-id` is not given: unique per process on a host."""
    return f"{socket.gethostname()}:{os.getpid()}"


@contextmanager
def install(http: HttpServer, host: Host, adapters: Sequence[Adapter], worker: str) -> Iterator[Metrics]:
    """Serve `/metrics` and add the readiness checks; metrics are collected until the context ends."""
    from bridge.servers.mcp_session import SessionState  # the host has loaded it already

    metrics = Metrics(worker)
    metrics.watch(host.broker.open_interactions,
                  lambda: [(s.server.name, s.state.value) for s in host.pool.sessions()],
                  platforms=[a.platform for a in adapters], servers=list(host.config.servers),
                  states=[SessionState.STARTING.value, SessionState.READY.value])

    async def scrape(request: Request) -> Response:
        return Response(metrics.exposition(), media_type=CONTENT_TYPE, headers=SECURITY_HEADERS)

    http.route("/metrics", scrape)
    for adapter in adapters:
        http.readiness(f"chat.{adapter.platform}", adapter.readiness)
    http.readiness("store", store_check(host.store))
    with observe.observing(metrics):
        yield metrics


def store_check(store: ProbedStore) -> ReadinessCheck:
    """A readiness check that commits a small write to the store and reports why it could not. A SQLite file is
    written on a connection of its own (in a worker thread, so a slow disk never stalls the bridge): it sees what
    the store's open connections do not, another process holding the write lock, or the file gone. Postgres gets
    the write through the store's pool, as decisions do."""

    async def check() -> str | None:
        with anyio.move_on_after(STORE_TIMEOUT + 1):
            if store.file is not None:
                return await anyio.to_thread.run_sync(_probe, store.file, abandon_on_cancel=True)
            if not store.shared:
                return None  # in memory: nothing to lose
            try:
                await store.set_adapter_value("bridge.health", f"probe/{store.worker_id}", str(time.time()))
            except StoreError as exc:
                return str(exc)
            return None
        return f"no answer within {STORE_TIMEOUT + 1:g}s"

    return check


def _probe(path: str) -> str | None:
    try:
        # mode=rw: a store file that is gone is not recreated empty here.
        uri = Path(path).resolve().as_uri() + "?mode=rw"
        db = sqlite3.connect(uri, uri=True, timeout=STORE_TIMEOUT, isolation_level=None)
        try:
            db.execute("INSERT OR REPLACE INTO adapter_state (namespace, key, value) VALUES (?, ?, ?)",
                       ("bridge.health", "probe", str(time.time())))
        finally:
            db.close()
    except sqlite3.Error as exc:
        return f"not writable: {exc}"
    return None


__all__ = ["default_worker_id", "install", "store_check"]
