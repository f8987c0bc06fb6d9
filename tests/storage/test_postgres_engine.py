"""The Postgres engine's own promises: the sync policy (only a decision's commit waits for its WAL flush), and errors
that say what is wrong in one line without the password."""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge.errors import StoreError
from bridge.storage import SqlStore, open_store
from bridge.storage.driver import Step

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
