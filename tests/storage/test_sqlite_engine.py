"""The SQLite engine: one process per file (a real second process), one synced commit per decision, writes off the
event loop, group commit; and the durability policy on both engines."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from bridge.door.model import CardRef
from bridge.errors import StoreError, StoreLocked
from bridge.storage import SqlStore, open_store
from bridge.storage import sqlite as sqlite_engine
from bridge.storage.driver import Step
from bridge.storage.sqlite import SqliteDriver
from tests.harness.hosts import ROOM, patient
from tests.storage.support import accepted, interaction, pending

pytestmark = pytest.mark.anyio

# A bridge process in miniature: opens the store, says so, holds it until its input closes. A store error is one
# line on stderr and exit status 2 (what the CLI does with every BridgeError).
HOLDER = """
import sys, anyio
from bridge.errors import BridgeError
from bridge.storage import open_store

async def main() -> None:
    store = await open_store(sys.argv[1])
    print("opened", flush=True)
    await anyio.to_thread.run_sync(sys.stdin.read)
    await store.aclose()

try:
    anyio.run(main)
except BridgeError as exc:
    print(f"error: {exc}", file=sys.stderr)
    sys.exit(2)
"""


def holder(path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2])


async def test_a_second_process_on_the_same_file_refuses_naming_the_first(tmp_path: Path) -> None:
    path = tmp_path / "bridge.db"
    store = await open_store(path)
    try:
        second = holder(path)
        with anyio.fail_after(patient(60)):
            out, err = await anyio.to_thread.run_sync(second.communicate)
        assert second.returncode == 2 and out == ""
        assert err.endswith("\n") and err.count("\n") == 1, err
        assert err == (f"error: the store {path} is in use by process {os.getpid()} (one bridge process per SQLite "
                       "store; stop it first, or use a Postgres store for several workers)\n")
        await store.save_interaction(interaction())  # the first goes on untouched
    finally:
        await store.aclose()


async def test_the_lock_dies_with_its_process_even_on_kill_9(tmp_path: Path) -> None:
    path = tmp_path / "bridge.db"
    first = holder(path)
    try:
        assert first.stdout is not None
        with anyio.fail_after(patient(60)):
            assert await anyio.to_thread.run_sync(first.stdout.readline) == "opened\n"
        with pytest.raises(StoreLocked) as refused:
            await open_store(path)
        assert refused.value.pid == first.pid
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate()
    store = await open_store(path)  # no stale lock to clean up
    await store.aclose()


async def test_one_synced_commit_per_decision_and_none_for_anything_else(store: SqlStore) -> None:
    """A 2026 decision's whole life (store the call, the card, claim, drop the call) and the chatter around it."""
    start = store.durable_commits
    for n in range(5):
        item = interaction()
        await store.save_pending_call(pending(f"call-{n}"))
        await store.save_interaction(item, pending_call=f"call-{n}", input_key="k")
        await store.set_card(item.id, CardRef(item.id, {"ts": str(n)}))
        await store.set_setting(ROOM, "k", str(n))
        await store.append_history(ROOM, [{"role": "user", "content": str(n)}])
        assert await store.claim(item, accepted()) is True
        assert await store.claim(item, accepted()) is False  # a lost claim writes nothing and syncs nothing
        await store.delete_pending_call(f"call-{n}")
        assert store.durable_commits - start == n + 1
    await store.audit(interaction(), accepted())
    await store.heartbeat(60)
    await store.take_expired()
    await store.prune(keep=0)
    assert store.durable_commits - start == 5


async def test_a_blocked_write_stalls_neither_the_event_loop_nor_reads(sqlite_store: SqlStore, tmp_path: Path) -> None:
    item = interaction()
    await sqlite_store.save_interaction(item)
    # Another connection holds the write lock: the writer thread waits for it (busy_timeout), not the event loop.
    other = sqlite3.connect(tmp_path / "bridge.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    claimed = anyio.Event()
    try:
        with anyio.fail_after(patient(4)):
            async with anyio.create_task_group() as tg:

                async def claim() -> None:
                    assert await sqlite_store.claim(item, accepted())
                    claimed.set()

                tg.start_soon(claim)
                for _ in range(20):
                    got = await sqlite_store.interaction(item.id)  # reads go on meanwhile (WAL)
                    assert got is not None
                    await anyio.lowlevel.checkpoint()  # and the loop runs other tasks
                assert not claimed.is_set()
                other.execute("COMMIT")
    finally:
        other.close()
    assert claimed.is_set()


async def test_concurrent_writes_share_commits_and_a_failing_one_fails_alone(sqlite_store: SqlStore) -> None:
    driver = sqlite_store.driver
    assert isinstance(driver, SqliteDriver)
    items = [interaction() for _ in range(50)]
    for item in items:
        await sqlite_store.save_interaction(item)
    commits, durable = driver.commits, driver.durable_commits
    failures: list[StoreError] = []
    won: list[bool] = []

    async def claim(n: int) -> None:
        won.append(await sqlite_store.claim(items[n], accepted()))

    async def broken() -> None:
        try:
            await driver.transaction([Step("INSERT INTO nowhere VALUES (1)")], durable=True)
        except StoreError as exc:
            failures.append(exc)

    with anyio.fail_after(patient(30)):
        async with anyio.create_task_group() as tg:
            for n in range(50):
                tg.start_soon(claim, n)
                if n % 10 == 0:
                    tg.start_soon(broken)
    assert won == [True] * 50 and len(failures) == 5
    assert all("no such table: nowhere" in str(f) for f in failures)
    assert 1 <= driver.durable_commits - durable <= driver.commits - commits <= 55
    assert len(await sqlite_store.audit_rows()) == 50


async def test_bookkeeping_is_written_behind_read_back_at_once_and_committed_soon(tmp_path: Path,
                                                                                  caplog: pytest.LogCaptureFixture,
                                                                                  ) -> None:
    """A running call's record and a card's reference cost their caller no hop to the writer: they ride the next
    batch, a read waits for them, `upkeep` commits them when nothing else writes, and closing commits the rest."""
    path = tmp_path / "bridge.db"
    store = await open_store(path, worker_id="w1")
    driver = store.driver
    assert isinstance(driver, SqliteDriver)
    item = interaction()
    try:
        await store.save_interaction(item)
        commits = driver.commits
        await store.record_running_call("call-1", ROOM, "srv", "tool")
        await store.set_card(item.id, CardRef(item.id, {"ts": "1.2"}))
        assert driver.commits == commits  # queued, not yet committed

        def committed() -> tuple[list[str], str | None]:
            with sqlite3.connect(path) as other:
                calls = [r[0] for r in other.execute("SELECT id FROM running_calls")]
                card = other.execute("SELECT card FROM interactions WHERE id = ?", (item.id,)).fetchone()[0]
            return calls, card

        assert committed() == ([], None)
        assert [c.id for c in await store.running_calls()] == ["call-1"]  # a read sees them: it waited for them
        stored = await store.interaction(item.id)
        assert stored is not None and stored.card == CardRef(item.id, {"ts": "1.2"})
        assert driver.commits == commits + 1  # one batch carried both
        assert committed() == (["call-1"], '{"ts": "1.2"}')

        # Nothing else writes: the upkeep commits it within its interval.
        await store.end_running_call("call-1")
        with anyio.fail_after(patient(5)):
            async with anyio.create_task_group() as tg:
                tg.start_soon(store.upkeep)
                while committed()[0]:  # noqa: ASYNC110 - another connection's view of the file: no event to await
                    await anyio.sleep(0.01)
                tg.cancel_scope.cancel()

        # A failing one is logged, and the writes beside it in its batch still count.
        await driver.write_behind([Step("INSERT INTO nowhere VALUES (1)")])
        await store.record_running_call("call-2", ROOM, "srv", "tool")
        assert [c.id for c in await store.running_calls()] == ["call-2"]
        assert "a store write nobody waited on failed: SQLite: no such table: nowhere" in caplog.text
        await store.end_running_call("call-2")
    finally:
        await store.aclose()  # commits what is still queued
    reopened = await open_store(path, worker_id="w1")
    try:
        assert await reopened.running_calls() == []
    finally:
        await reopened.aclose()


async def test_a_2026_round_is_committed_with_its_first_card_in_one_batch(tmp_path: Path,
                                                                           caplog: pytest.LogCaptureFixture) -> None:
    """The stored round costs the call no hop of its own: the first card's interaction carries it to the disk, in
    one commit, before the card could be posted. If its write failed, that interaction is refused too: no card is
    posted for a call that could not be continued."""
    path = tmp_path / "bridge.db"
    store = await open_store(path, worker_id="w1")
    driver = store.driver
    assert isinstance(driver, SqliteDriver)
    try:
        commits = driver.commits
        await store.save_pending_call(pending("call-1"))
        assert driver.commits == commits  # queued
        card = interaction()
        await store.save_interaction(card, pending_call="call-1", input_key="k", parked=True)
        assert driver.commits == commits + 1  # one batch carried both
        with sqlite3.connect(path) as other:
            assert other.execute("SELECT id FROM pending_calls").fetchall() == [("call-1",)]
            assert other.execute("SELECT pending_call FROM interactions WHERE id = ?",
                                 (card.id,)).fetchall() == [("call-1",)]

        # The round's write fails (here: a row missing its required columns): its card is refused.
        await driver.write_behind([Step("INSERT INTO pending_calls (id) VALUES ('call-2')")])  # NOT NULL columns
        refused = interaction()
        with pytest.raises(StoreError, match="call-2 is not on record"):
            await store.save_interaction(refused, pending_call="call-2", input_key="k", parked=True)
        assert "a store write nobody waited on failed" in caplog.text
        assert await store.interaction(refused.id) is None
    finally:
        await store.aclose()


async def test_an_in_memory_store_works_through_its_one_connection() -> None:
    store = await open_store(":memory:")
    try:
        item = interaction()
        await store.save_interaction(item)
        assert await store.claim(item, accepted()) is True
        assert [r.outcome for r in await store.audit_rows(item.id)] == ["accepted"]
        assert store.durable_commits == 1
    finally:
        await store.aclose()


@pytest.mark.parametrize("anyio_backend", ["trio"])
async def test_the_sqlite_engine_runs_on_trio_too(tmp_path: Path) -> None:
    """Plain anyio (its writer thread wakes the loop through anyio's token), so the core's trio tests can use it."""
    store = await open_store(tmp_path / "bridge.db")
    try:
        items = [interaction() for _ in range(10)]
        for item in items:
            await store.save_interaction(item)
        wins: list[bool] = []

        async def claim(n: int) -> None:
            wins.append(await store.claim(items[n % 10], accepted()))

        async with anyio.create_task_group() as tg:
            for n in range(100):
                tg.start_soon(claim, n)
        assert wins.count(True) == 10
        assert await store.open_interactions() == []
        last = interaction()
        await store.save_interaction(last)
        with anyio.CancelScope() as scope:  # the thread wakes a trio task as well, and a queued write still ends
            scope.cancel()
            assert await store.claim(last, accepted()) is True
        stored = await store.interaction(last.id)
        assert stored is not None and stored.outcome == accepted()
    finally:
        await store.aclose()


def writer_threads(path: Path) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"sqlite writer {path}"]


async def test_the_writer_thread_is_started_by_open_and_joined_by_aclose(tmp_path: Path) -> None:
    """The thread that runs every write belongs to the store: `aclose` commits what was queued, then the thread
    closes its connection and ends; nothing is left behind."""
    path = tmp_path / "bridge.db"
    store = await open_store(path)
    [thread] = writer_threads(path)
    assert thread.is_alive()
    item = interaction()
    await store.save_interaction(item)
    await store.set_card(item.id, CardRef(item.id, {"ts": "1.2"}))  # written behind: committed by `aclose`
    await store.aclose()
    assert not thread.is_alive() and writer_threads(path) == []
    assert not (tmp_path / "bridge.db-wal").exists()  # the writer's connection was the last one, and it is closed
    with sqlite3.connect(path) as other:
        card = other.execute("SELECT card FROM interactions WHERE id = ?", (item.id,)).fetchall()
    assert card == [('{"ts": "1.2"}',)]


async def test_a_read_waits_for_bookkeeping_another_write_carries(sqlite_store: SqlStore, tmp_path: Path) -> None:
    """A write-behind job handed to the writer with someone else's write is still waited for by a read."""
    item = interaction()
    await sqlite_store.save_interaction(item)
    other = sqlite3.connect(tmp_path / "bridge.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # the writer waits for it: the batch stays in flight
    try:
        with anyio.fail_after(patient(4)):
            async with anyio.create_task_group() as tg:
                await sqlite_store.set_card(item.id, CardRef(item.id, {"ts": "7"}))
                tg.start_soon(sqlite_store.set_setting, ROOM, "k", "v")  # takes the card's reference along
                await anyio.lowlevel.checkpoint()

                async def release() -> None:
                    other.execute("COMMIT")

                tg.start_soon(release)
                stored = await sqlite_store.interaction(item.id)
                assert stored is not None and stored.card == CardRef(item.id, {"ts": "7"})
    finally:
        other.close()


async def test_no_write_pays_for_a_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite's own checkpoint runs inside whichever commit crosses 1000 WAL pages, syncing the database file on
    that write's way. Here writes of some 1500 pages leave the database file as it was: below `WAL_LIMIT`, only the
    WAL takes them."""
    monkeypatch.setattr(sqlite_engine, "WAL_LIMIT", 64 * 1024 * 1024, raising=False)
    path = tmp_path / "bridge.db"
    store = await open_store(path)
    driver = store.driver
    assert isinstance(driver, SqliteDriver)
    try:
        await driver.transaction([Step("CREATE TABLE blobs (b BLOB)")])
        before = path.stat()
        for n in range(300):
            await driver.transaction([Step("INSERT INTO blobs VALUES (?)", (os.urandom(16 * 1024),))],
                                     durable=n % 10 == 0)
        after = path.stat()
        assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
        assert driver.checkpoints == 0
    finally:
        await store.aclose()


async def test_the_wal_stays_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Thousands of writes, one at a time and in bursts: the writer checkpoints between them, and the WAL file never
    grows past four times `WAL_LIMIT` (and a batch)."""
    limit = 64 * 1024
    monkeypatch.setattr(sqlite_engine, "WAL_LIMIT", limit, raising=False)
    path = tmp_path / "bridge.db"
    wal = tmp_path / "bridge.db-wal"
    store = await open_store(path)
    driver = store.driver
    assert isinstance(driver, SqliteDriver)
    largest = 0
    try:
        await driver.transaction([Step("CREATE TABLE rows (n INTEGER, v TEXT)")])

        async def write(n: int) -> None:
            await driver.transaction([Step("INSERT INTO rows VALUES (?, ?)", (n, "x" * 300))], durable=n % 7 == 0)

        with anyio.fail_after(patient(120)):
            for n in range(2000):
                await write(n)
                largest = max(largest, wal.stat().st_size)
            for burst in range(50):
                async with anyio.create_task_group() as tg:
                    for n in range(20):
                        tg.start_soon(write, 10_000 + burst * 20 + n)
                largest = max(largest, wal.stat().st_size)
        assert largest <= 5 * limit, largest
        assert await driver.fetch("SELECT count(*) FROM rows") == [(3000,)]
        assert driver.checkpoints > 0
    finally:
        await store.aclose()
