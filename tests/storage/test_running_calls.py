"""Calls running (any era) on record, on both engines: each worker's own, ended when the call ends, and a stopped
worker's (an earlier run of this process, or a dead worker on a shared store) handed once to the survivor that tells
their conversations."""

from __future__ import annotations

import time

import pytest

from tests.harness.hosts import ROOM
from tests.storage.support import worker

pytestmark = pytest.mark.anyio


async def test_a_stopped_workers_running_calls_are_handed_over_once(target: str, engine: str) -> None:
    now = time.time()
    async with worker(target, "dead") as dead:
        await dead.record_running_call("c1", ROOM, "srv", "slow")
        await dead.record_running_call("c2", ROOM, "srv", "quick")
        await dead.end_running_call("c2")  # it finished
        assert [(c.id, c.conversation, c.server, c.tool) for c in await dead.running_calls()] == [
            ("c1", ROOM.id(), "srv", "slow")]
        await dead.heartbeat(lease=30, now=now)
    # Closed (SQLite: the next process proves the last one gone) or silent (Postgres: its lease lapses).
    later = now + 31
    async with worker(target, "w2") as survivor:
        assert await survivor.running_calls() == []  # another worker's calls are not this one's
        reaped = await survivor.reap_workers(now=later)
        if engine == "postgres":  # one process per SQLite file: only Postgres has a bystander
            async with worker(target, "w3") as bystander:
                assert (await bystander.reap_workers(now=later)).running == ()
        assert [c.id for c in reaped.running] == ["c1"]
        assert (await survivor.reap_workers(now=later)).running == ()
        await survivor.end_running_call("c1")  # told, then gone
    async with worker(target, "w2") as again:
        assert (await again.reap_workers(now=later)).running == ()


async def test_the_same_worker_restarted_takes_its_own_earlier_calls(target: str) -> None:
    async with worker(target, "w1") as first:
        await first.record_running_call("c1", ROOM, "srv", "slow")
    async with worker(target, "w1") as restarted:  # the same --worker-id: nobody holds c1 in memory any more
        assert [c.id for c in (await restarted.reap_workers()).running] == ["c1"]
