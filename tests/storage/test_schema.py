"""The schema: migrations at start (an old file adopted in place with every row, steps all-or-nothing, a newer schema
refused, racing workers), the indexes a restart reads through, and pruning."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from bridge.door.model import CardRef, Kind, Outcome, Status
from bridge.errors import StoreSchemaError
from bridge.storage import SqlStore, open_store
from bridge.storage.codec import INTERACTION_COLUMNS
from bridge.storage.driver import Step
from bridge.storage.migrations import LATEST, MIGRATIONS, Migration, migrate
from tests.harness.hosts import ALICE, ROOM, patient
from tests.harness.legacy_store import Store
from tests.storage.support import accepted, interaction, pending

pytestmark = pytest.mark.anyio


async def versions(store: SqlStore) -> list[int]:
    return [r[0] for r in await store.driver.fetch("SELECT version FROM schema_version ORDER BY version")]


async def test_a_file_written_by_the_old_store_is_upgraded_in_place_with_every_row(tmp_path: Path) -> None:
    path = tmp_path / "bridge.db"
    old = Store(path)
    waiting, answered = interaction(), interaction()
    old.save_pending_call(pending("call-1"))
    old.save_interaction(waiting, pending_call="call-1", input_key="k")
    old.set_card(waiting.id, CardRef(waiting.id, {"ts": "9.9"}))
    old.save_interaction(answered)
    old.finish_interaction(answered, accepted(n=7))
    old.audit(waiting, Outcome(Status.FAILED, reason="an old standalone row"))
    old.add_root(ROOM, "file:///a", "A")
    old.set_setting(ROOM, "roots:srv", "all")
    old.set_adapter_value("slack", "k", "v")
    old.append_history(ROOM, [{"role": "user", "content": "hi"}])
    old.record_running_call("run-1", ROOM, "srv", "count_down")  # the last release's record of a running call
    old.close()

    store = await open_store(path, worker_id="new")
    try:
        assert await versions(store) == [m.version for m in MIGRATIONS]
        [still_open] = await store.open_interactions()
        assert still_open.interaction == waiting and still_open.card == CardRef(waiting.id, {"ts": "9.9"})
        assert (still_open.pending_call, still_open.input_key) == ("call-1", "k")
        done = await store.interaction(answered.id)
        assert done is not None and done.outcome == accepted(n=7)
        assert [c.id for c in await store.pending_calls()] == ["call-1"]
        assert [r.outcome for r in await store.audit_rows()] == ["accepted", "failed"]
        assert await store.roots(ROOM) == [("file:///a", "A")]
        assert await store.setting(ROOM, "roots:srv") == "all"
        assert await store.adapter_value("slack", "k") == "v"
        assert await store.history(ROOM) == [{"role": "user", "content": "hi"}]
        # New columns filled from the old rows: the deadline, and no owner (so a survivor may take it over).
        assert await store.next_deadline() == waiting.expires_at
        reaped = await store.reap_workers()
        assert [s.interaction.id for s in reaped.interactions] == [waiting.id]
        assert [c.id for c in reaped.pending_calls] == ["call-1"]
        assert [(r.id, r.tool) for r in reaped.running] == [("run-1", "count_down")]  # told as interrupted
        assert await store.claim(waiting, accepted()) is True
    finally:
        await store.aclose()
    again = await open_store(path, worker_id="later")  # nothing left to migrate, nothing lost
    try:
        assert await versions(again) == [m.version for m in MIGRATIONS]
        assert len(await again.audit_rows()) == 3
    finally:
        await again.aclose()


async def test_a_failing_migration_step_leaves_nothing_behind_and_can_be_fixed(store: SqlStore) -> None:
    broken = Migration(LATEST + 1, "broken", ("CREATE TABLE t_new (x INTEGER)", "INSERT INTO nowhere VALUES (1)"),
                       ("CREATE TABLE t_new (x INTEGER)", "INSERT INTO nowhere VALUES (1)"))
    with pytest.raises(StoreSchemaError, match=f"schema migration {LATEST + 1} \\(broken\\) failed"):
        await migrate(store.driver, (*MIGRATIONS, broken))
    assert await versions(store) == [m.version for m in MIGRATIONS]
    fixed = Migration(LATEST + 1, "fixed", ("CREATE TABLE t_new (x INTEGER)",), ("CREATE TABLE t_new (x INTEGER)",))
    assert await migrate(store.driver, (*MIGRATIONS, fixed)) == LATEST + 1  # t_new did not survive the failure
    assert await store.driver.fetch("SELECT count(*) FROM t_new") == [(0,)]


async def test_a_store_from_a_newer_bridge_is_refused(target: str) -> None:
    store = await open_store(target, worker_id="w1")
    await store.driver.transaction([Step("INSERT INTO schema_version (version, applied_at) VALUES (?, ?)",
                                         (LATEST + 7, time.time()))])
    await store.aclose()
    with pytest.raises(StoreSchemaError, match=f"schema version {LATEST + 7}, newer than"):
        await open_store(target, worker_id="w1")


async def test_workers_starting_together_migrate_once(pg_target: str) -> None:
    opened: list[SqlStore] = []

    async def start(n: int) -> None:
        opened.append(await open_store(pg_target, worker_id=f"w{n}"))

    try:
        with anyio.fail_after(patient(60)):
            async with anyio.create_task_group() as tg:
                for n in range(4):
                    tg.start_soon(start, n)
        assert await versions(opened[0]) == [m.version for m in MIGRATIONS]
    finally:
        for store in opened:
            await store.aclose()


async def plan(store: SqlStore, query: str) -> str:
    """The engine's plan for `query`, with sequential scans discouraged (tables here are tiny)."""
    if store.driver.dialect == "sqlite":
        rows = await store.driver.fetch(f"EXPLAIN QUERY PLAN {query}")
        return " / ".join(str(r[-1]) for r in rows)
    done = await store.driver.transaction([Step("SET LOCAL enable_seqscan = off"), Step(f"EXPLAIN {query}")])
    return " / ".join(str(r[0]) for r in done[-1].rows)


async def test_what_a_restart_reads_goes_through_indexes(store: SqlStore) -> None:
    select = f"SELECT {INTERACTION_COLUMNS} FROM interactions"
    assert "interactions_status_created" in await plan(
        store, f"{select} WHERE status = 'open' ORDER BY created_at")
    assert "interactions_call" in await plan(
        store, f"{select} WHERE pending_call = 'call-1' AND created_at >= 0 ORDER BY created_at")
    # Deadlines are read among open rows only: through the deadline index or the open rows' one.
    deadline = await plan(store, "SELECT min(expires_at) FROM interactions WHERE status = 'open'")
    assert "interactions_deadline" in deadline or "interactions_status_created" in deadline
    assert "audit_interaction" in await plan(store, "SELECT * FROM audit WHERE interaction_id = 'x'")


async def test_pruning_drops_old_finished_rows_and_keeps_the_rest(store: SqlStore) -> None:
    old_done, old_open, new_done, kept_for_call, gone_call = (interaction() for _ in range(5))
    await store.save_pending_call(pending("still-pending"))
    await store.save_pending_call(pending("finished-call"))
    for item, call in ((old_done, None), (old_open, None), (new_done, None), (kept_for_call, "still-pending"),
                       (gone_call, "finished-call")):
        await store.save_interaction(item, pending_call=call)
    await store.delete_pending_call("finished-call")
    for item in (old_done, new_done, kept_for_call, gone_call):
        await store.claim(item, accepted())
    month = 30 * 86400
    await store.driver.transaction([Step("UPDATE interactions SET created_at = created_at - ? WHERE id <> ?",
                                         (2 * month, new_done.id))])

    assert await store.prune(keep=month) == 2
    assert await store.interaction(old_done.id) is None and await store.interaction(gone_call.id) is None
    for item in (old_open, new_done, kept_for_call):
        assert await store.interaction(item.id) is not None
    assert len(await store.audit_rows(old_done.id)) == 1  # the record stays
    assert await store.prune(keep=month) == 0
    assert ALICE.key in {r.actor for r in await store.audit_rows()}


async def test_a_stored_call_keeps_the_card_that_approved_it_until_it_ends(store: SqlStore) -> None:
    approval = interaction(kind=Kind.TOOL, tool="book")
    await store.save_interaction(approval)
    await store.claim(approval, accepted())
    await store.save_pending_call(replace(pending("call-a"), approval=approval.id))
    await store.flush()
    month = 30 * 86400
    await store.driver.transaction([Step("UPDATE interactions SET created_at = created_at - ?", (2 * month,))])

    stored = await store.pending_call("call-a")
    assert stored is not None and stored.approval == approval.id
    assert [c.approval for c in await store.pending_calls()] == [approval.id]
    assert await store.prune(keep=month) == 0  # its receipt is made again from it after a restart
    await store.delete_pending_call("call-a")
    assert await store.prune(keep=month) == 1
