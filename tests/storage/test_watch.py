"""`DecisionWatch`: the worker that owns a legacy call hears that another worker decided it, through NOTIFY, and
through polling while the listening connection is lost; `keep_alive` keeps a worker's lease."""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio
import anyio.abc
import pytest

from bridge.storage import SqlStore
from bridge.storage.signin_rows import SIGNAL_PREFIX
from bridge.storage.watch import DecisionWatch, keep_alive
from tests.harness.hosts import patient
from tests.harness.postgres import PostgresCluster
from tests.storage.support import accepted, interaction, worker

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def watching(store: SqlStore, **options: float) -> AsyncIterator[DecisionWatch]:
    watch = DecisionWatch(store, **options)
    async with anyio.create_task_group() as tg:
        await tg.start(watch.run)
        yield watch
        tg.cancel_scope.cancel()


async def test_the_owner_hears_another_workers_decision_by_notification(pg_target: str, pg_store: SqlStore) -> None:
    items = [interaction() for _ in range(3)]
    for item in items:
        await pg_store.save_interaction(item)
    # Polling set far beyond the test's deadline: only notifications can wake the owner in time.
    async with worker(pg_target) as other, watching(pg_store, poll=3600, poll_listening=3600) as watch:
        assert watch.listening
        with anyio.fail_after(patient(20)):
            async with anyio.create_task_group() as tg:
                for item in items:
                    await tg.start(watch.wait, item.id)
                for item in items:
                    assert await other.claim(item, accepted()) is True
        # Already decided: returns at once.
        with anyio.fail_after(patient(20)):
            await watch.wait(items[0].id)


async def test_with_the_listening_connection_lost_the_owner_hears_by_polling(
        pg_target: str, pg_store: SqlStore, postgres: PostgresCluster) -> None:
    item = interaction()
    await pg_store.save_interaction(item)
    # Reconnecting set beyond the deadline: only polling can wake the owner once its listener is gone.
    async with worker(pg_target) as other, watching(pg_store, poll=0.05, poll_listening=3600, reconnect=3600) as watch:
        with anyio.fail_after(patient(20)):
            async with anyio.create_task_group() as tg:
                await tg.start(watch.wait, item.id)
                killed = postgres.psql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                                       " WHERE query LIKE 'LISTEN %'")
                assert killed == "1"
                assert await other.claim(item, accepted()) is True
        assert not watch.listening


class Beating:
    """A real store's heartbeat, counted."""

    def __init__(self, store: SqlStore, beats: int) -> None:
        self.store = store
        self.count = 0
        self.enough = anyio.Event()
        self.beats = beats

    async def heartbeat(self, lease: float, *, now: float | None = None) -> None:
        await self.store.heartbeat(lease, now=now)
        self.count += 1
        if self.count == self.beats:
            self.enough.set()


async def test_keep_alive_renews_the_workers_lease(store: SqlStore) -> None:
    beating = Beating(store, beats=3)
    before = time.time()
    with anyio.fail_after(patient(20)):
        async with anyio.create_task_group() as tg:
            tg.start_soon(functools.partial(keep_alive, beating, 600.0, every=0.01))
            await beating.enough.wait()
            tg.cancel_scope.cancel()
    rows = await store.driver.fetch("SELECT lease_until FROM workers WHERE id = ?", (store.worker_id,))
    assert rows[0][0] >= before + 600


async def test_a_sign_in_handed_over_elsewhere_is_seen_by_notification_and_by_polling_without_one(
        pg_target: str, pg_store: SqlStore, postgres: PostgresCluster) -> None:
    async with worker(pg_target) as other:
        def handing_over(key: str, tg: anyio.abc.TaskGroup) -> Callable[[], Awaitable[str | None]]:
            """A look at the row that sees it pending the first time, and has the other worker hand it over then."""
            looks = 0

            async def look() -> str | None:
                nonlocal looks
                looks += 1
                if looks == 1:
                    tg.start_soon(other.return_signin, key, "code", None, None)
                    return None
                row = await pg_store.signin(key)
                return row.status if row is not None and row.status != "pending" else None

            return look

        for key in ("heard", "polled"):
            await pg_store.save_signin(key, "srv", "test:U-ada", time.time() + 600)
        # Notifications only (polling beyond the deadline).
        async with watching(pg_store, poll=3600, poll_listening=3600) as watch:
            with anyio.fail_after(patient(20)):
                async with anyio.create_task_group() as tg:
                    assert await watch.changed(SIGNAL_PREFIX + "heard", handing_over("heard", tg)) == "returned"
        # The listening connection lost (reconnecting beyond the deadline): polling alone.
        async with watching(pg_store, poll=0.05, poll_listening=3600, reconnect=3600) as watch:
            killed = postgres.psql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                                   " WHERE query LIKE 'LISTEN %'")
            assert killed == "1"
            with anyio.fail_after(patient(20)):
                async with anyio.create_task_group() as tg:
                    assert await watch.changed(SIGNAL_PREFIX + "polled", handing_over("polled", tg)) == "returned"
