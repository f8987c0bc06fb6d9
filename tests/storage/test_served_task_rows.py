"""Rows of tasks run for servers, on both engines: the per-server bound holds over every task going (ended ones do
not count), an ended task stays as it ended, rows past their TTL are dropped, and a restarted worker's tasks fail."""

from __future__ import annotations

import time

import pytest

from bridge.storage import SqlStore
from bridge.storage.served_tasks import ServedTask
from tests.storage.support import worker

pytestmark = pytest.mark.anyio


def task(task_id: str, server: str = "srv", *, ttl: float = 600.0, age: float = 0.0) -> ServedTask:
    created = time.time() - age
    return ServedTask(task_id, server, "elicitation/create", "test:room", "working", "", None, None, None, created,
                      created, int(ttl * 1000), created + ttl, "")


async def test_the_bound_counts_the_tasks_going_for_one_server(store: SqlStore) -> None:
    assert await store.create_served_task(task("a"), 2)
    assert await store.create_served_task(task("b"), 2)
    assert not await store.create_served_task(task("c"), 2)  # two going already
    assert await store.create_served_task(task("x", "other"), 2)  # another server's are its own
    assert await store.update_served_task("a", "completed", "answered", result='{"action": "accept"}')
    assert await store.create_served_task(task("c"), 2)  # an ended one no longer counts
    assert await store.served_task("c") is not None


async def test_an_ended_task_stays_as_it_ended(store: SqlStore) -> None:
    assert await store.create_served_task(task("a"), 5)
    assert await store.update_served_task("a", "input_required", "waiting", interaction_id="i-1")
    assert await store.update_served_task("a", "cancelled", "cancelled by the server")
    assert not await store.update_served_task("a", "completed", "answered", result="{}")  # the cancel stands
    row = await store.served_task("a")
    assert row is not None and (row.status, row.status_message, row.result) == (
        "cancelled", "cancelled by the server", None)


async def test_rows_past_their_ttl_are_dropped(store: SqlStore) -> None:
    assert await store.create_served_task(task("old", ttl=60, age=61), 5)  # its minute is over
    stale = await store.served_task("old")
    assert stale is not None and stale.gone(time.time())
    assert await store.create_served_task(task("new"), 5)
    assert await store.served_task("old") is None


async def test_a_restarted_workers_tasks_fail_and_others_are_left_alone(target: str) -> None:
    async with worker(target, "w9") as other:
        assert await other.create_served_task(task("theirs"), 5)
    async with worker(target, "w1") as first:
        assert await first.create_served_task(task("mine"), 5)
    async with worker(target, "w1") as again:
        assert await again.end_served_tasks("the bridge stopped") == 1
        mine, theirs = await again.served_task("mine"), await again.served_task("theirs")
    assert mine is not None and (mine.status, mine.status_message) == ("failed", "the bridge stopped")
    assert theirs is not None and theirs.status == "working"
