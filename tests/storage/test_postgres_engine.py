"""The Postgres engine's own promises: the sync policy (only a decision's commit waits for its WAL flush), errors
that say what is wrong in one line without the password, pipelined transactions that stay all or nothing, and jobs
written behind that a read or a later write never overtakes."""

from __future__ import annotations

from pathlib import Path

import anyio
import psycopg
import pytest

from bridge.door.model import CardRef
from bridge.errors import StoreError
from bridge.storage import SqlStore, open_store
from bridge.storage.driver import Done, Step
from bridge.storage.postgres import PostgresDriver
from tests.harness.hosts import ROOM, patient
from tests.storage.support import interaction, pending

pytestmark = pytest.mark.anyio


async def test_only_a_decisions_commit_waits_for_the_disk(pg_store: SqlStore) -> None:
    driver = pg_store.driver
    assert await driver.fetch("SHOW synchronous_commit") == [("off",)]
    durable = await driver.transaction([Step("SHOW synchronous_commit")], durable=True)
    assert durable[0].rows == [("on",)]
    plain = await driver.transaction([Step("SHOW synchronous_commit"), Step("SELECT 1")])
    assert plain[0].rows == [("off",)]
    assert await driver.fetch("SHOW synchronous_commit") == [("off",)]  # SET LOCAL ended with its transaction


async def test_an_unreachable_server_is_one_line_without_the_password(tmp_path: Path) -> None:
    url = f"postgresql://bridge:hunter2-secret@/bridge?host={tmp_path}&port=5999&connect_timeout=2"
    with pytest.raises(StoreError) as failed:
        await open_store(url, worker_id="w1")
    message = str(failed.value)
    assert message.startswith("cannot reach the postgres database bridge on ")
    assert "hunter2" not in message and "\n" not in message


async def test_a_failing_statement_is_a_store_error_and_the_pool_goes_on(pg_store: SqlStore) -> None:
    with pytest.raises(StoreError, match="nowhere"):
        await pg_store.driver.transaction([Step("INSERT INTO nowhere VALUES (1)")], durable=True)
    with pytest.raises(StoreError, match="nowhere"):
        await pg_store.driver.fetch("SELECT * FROM nowhere")
    assert await pg_store.open_interactions() == []
    assert pg_store.durable_commits == 0


async def test_a_pipelined_transaction_whose_middle_step_fails_is_rolled_back_whole(pg_store: SqlStore) -> None:
    """BEGIN, the steps and COMMIT go out together: a step failing in the middle aborts the rest, and nothing of the
    transaction stays, durable or not; the connection goes back to the pool clean."""
    driver = pg_store.driver
    insert = "INSERT INTO settings (conversation, key, value) VALUES (?, ?, ?)"
    for durable in (False, True):
        with pytest.raises(StoreError, match="nowhere"):
            await driver.transaction([Step(insert, ("c", "a", "1")), Step("INSERT INTO nowhere VALUES (1)"),
                                      Step(insert, ("c", "b", "2"))], durable=durable)
        assert await driver.fetch("SELECT key FROM settings") == []
    # The pool's connections all work (none was left inside the failed transaction).
    for _ in range(3):
        done = await driver.transaction([Step(insert, ("c", "a", "1")), Step("DELETE FROM settings")])
        assert [d.count for d in done] == [1, 1]
    assert pg_store.durable_commits == 0


async def test_a_broken_connection_mid_transaction_is_a_store_error_and_replaced(pg_store: SqlStore) -> None:
    driver = pg_store.driver
    with pytest.raises(StoreError):
        await driver.transaction([Step("SELECT 1"), Step("SELECT pg_terminate_backend(pg_backend_pid())"),
                                  Step("SELECT 2")])
    assert await driver.fetch("SELECT 3") == [(3,)]


async def test_guarded_steps_see_their_first_steps_count_and_rows_before(pg_store: SqlStore) -> None:
    """A guarded step waits for its job's first count; a step whose parameters are made from the rows before it
    waits for those (the client syncs there, and only there)."""
    driver = pg_store.driver
    await pg_store.set_setting(ROOM, "k", "v")
    touch = "UPDATE settings SET value = value WHERE key = ?"
    insert = "INSERT INTO adapter_state (namespace, key, value) VALUES (?, ?, ?)"

    def from_rows(before: list[Done]) -> tuple[str, str, str]:
        return ("ns", "copied", str(before[-1].rows[0][0]))

    for key, ran in (("absent", False), ("k", True)):
        done = await driver.transaction([
            Step(touch, (key,)),
            Step("SELECT value FROM settings WHERE key = ?", ("k",)),
            Step(insert, from_rows, guarded=True),
            Step(insert, ("ns", f"guarded-{key}", "x"), guarded=True)], durable=True)
        assert [d.ran for d in done] == [True, True, ran, ran]
        assert done[1].rows == [("v",)]
    assert sorted(await driver.fetch("SELECT key, value FROM adapter_state")) == [("copied", "v"), ("guarded-k", "x")]


async def test_jobs_written_behind_are_read_back_committed_before_later_writes_and_at_close(
        pg_target: str, caplog: pytest.LogCaptureFixture) -> None:
    """A running call's record, a card shown final: queued without a round trip, committed in one transaction before
    the next read or write of the store, by `upkeep` in the background, and at close. A failing one is logged and
    the others of its batch are kept. A card's reference is not among them here: another worker may be clicked on
    the card next and must find it."""
    store = await open_store(pg_target, worker_id="w1")
    driver = store.driver
    assert isinstance(driver, PostgresDriver)
    item = interaction()
    other = await psycopg.AsyncConnection.connect(pg_target, autocommit=True)

    async def committed() -> tuple[list[str], str | None]:
        calls = [r[0] for r in await (await other.execute("SELECT id FROM running_calls")).fetchall()]
        card = await (await other.execute("SELECT card FROM interactions WHERE id = %s", (item.id,))).fetchall()
        return calls, card[0][0] if card else None

    try:
        await store.save_interaction(item)
        await store.set_card(item.id, CardRef(item.id, {"ts": "1.2"}))
        assert await committed() == ([], '{"ts": "1.2"}')  # committed at once, for the other workers
        commits = driver.commits
        await store.record_running_call("call-1", ROOM, "srv", "tool")
        await store.record_running_call("call-0", ROOM, "srv", "tool")
        await store.end_running_call("call-0")
        assert driver.commits == commits
        assert await committed() == ([], '{"ts": "1.2"}')  # queued: nobody else sees them yet
        assert [c.id for c in await store.running_calls()] == ["call-1"]  # a read waited for them
        assert driver.commits == commits + 1  # one transaction carried the three
        assert await committed() == (["call-1"], '{"ts": "1.2"}')

        # A later write commits after them: a 2026 call's round and its first card (which needs the round's row).
        await store.save_pending_call(pending("call-9"))
        await store.save_interaction(interaction(), pending_call="call-9", input_key="k", parked=True)

        # Nothing else comes: the upkeep commits it.
        await store.end_running_call("call-1")
        with anyio.fail_after(patient(5)):
            async with anyio.create_task_group() as tg:
                tg.start_soon(store.upkeep)
                while (await committed())[0]:  # noqa: ASYNC110 - another session's view: no event to await
                    await anyio.sleep(0.01)
                tg.cancel_scope.cancel()

        # A failing job is logged; the jobs beside it in its batch still count.
        await driver.write_behind([Step("INSERT INTO nowhere VALUES (1)")])
        await store.record_running_call("call-2", ROOM, "srv", "tool")
        await store.flush()
        assert "a store write nobody waited on failed: Postgres:" in caplog.text and "nowhere" in caplog.text
        assert (await committed())[0] == ["call-2"]
        await store.end_running_call("call-2")
        await store.mark_shown(item.id)
    finally:
        await store.aclose()  # commits what is still queued
    try:
        assert (await committed())[0] == []
        shown = await (await other.execute("SELECT shown FROM interactions WHERE id = %s", (item.id,))).fetchall()
        assert shown == [(1,)]
    finally:
        await other.close()


async def test_a_2026_round_rides_its_first_cards_commit_and_a_failed_one_refuses_the_card(
        pg_store: SqlStore, caplog: pytest.LogCaptureFixture) -> None:
    """The round written behind costs no transaction of its own: the first card's, which needs its row, carries it
    in one commit. If the round's write fails, the card's own write still runs on its own and is refused (no card
    for a call nobody could continue), and the failure is logged."""
    driver = pg_store.driver
    assert isinstance(driver, PostgresDriver)
    commits = driver.commits
    await pg_store.save_pending_call(pending("call-1"))
    card = interaction()
    await pg_store.save_interaction(card, pending_call="call-1", input_key="k", parked=True)
    assert driver.commits == commits + 1  # one transaction carried both
    stored = await pg_store.interaction(card.id)
    assert stored is not None and stored.pending_call == "call-1"

    await driver.write_behind([Step("INSERT INTO pending_calls (id) VALUES ('call-2')")])  # NOT NULL columns
    refused = interaction()
    with pytest.raises(StoreError, match="call-2 is not on record"):
        await pg_store.save_interaction(refused, pending_call="call-2", input_key="k", parked=True)
    assert "a store write nobody waited on failed" in caplog.text
    assert await pg_store.interaction(refused.id) is None
    # A job that fails beside a transaction that works: the transaction still commits.
    await driver.write_behind([Step("INSERT INTO nowhere VALUES (1)")])
    await pg_store.set_setting(ROOM, "k", "v")
    assert await pg_store.setting(ROOM, "k") == "v"
