"""What several workers (or one restarted process) need: stored deadlines and the expiry lease, worker leases and
reaping, decision notifications, leadership, pruning and the restart indexes. Both engines unless a test says why
not. Time is passed in (`now=`), never slept through."""

from __future__ import annotations

import time

import anyio
import pytest
from psycopg import AsyncConnection

from bridge.door.model import CardRef, Outcome, Status
from bridge.storage import SqlStore, open_store
from bridge.storage.driver import Step
from bridge.storage.postgres import lock_key
from tests.harness.hosts import patient
from tests.harness.postgres import PostgresCluster
from tests.storage.support import accepted, interaction, pending, worker

pytestmark = pytest.mark.anyio
EXPIRED = Outcome(Status.EXPIRED, reason="nobody answered in time")


async def test_claimers_on_two_pools_make_exactly_one_winner_per_card(pg_target: str, pg_store: SqlStore) -> None:
    """Two workers (two pools, 10 connections each), 100 claimers per card, 10 cards claimed at once."""
    items = [interaction() for _ in range(10)]
    for item in items:
        await pg_store.save_interaction(item)
    wins: dict[str, list[str]] = {item.id: [] for item in items}
    async with worker(pg_target) as other:

        async def claimer(store: SqlStore, n: int) -> None:
            item = items[n % len(items)]
            if await store.claim(item, accepted(n=n % 10)):
                wins[item.id].append(store.worker_id)

        with anyio.fail_after(patient(60)):
            async with anyio.create_task_group() as tg:
                for n in range(1000):
                    tg.start_soon(claimer, pg_store if n % 2 else other, n)
    assert all(len(w) == 1 for w in wins.values()), wins
    assert {w[0] for w in wins.values()} <= {"w1", "w2"}
    assert sorted(r.interaction_id for r in await pg_store.audit_rows()) == sorted(wins)


async def test_deadlines_are_stored_and_leased_to_one_worker_until_the_lease_lapses(store: SqlStore) -> None:
    now = time.time()
    late, later, future = interaction(expires_at=now - 20), interaction(expires_at=now - 10), interaction(600)
    for item in (future, later, late):
        await store.save_interaction(item)
    assert await store.next_deadline() == late.expires_at

    taken = await store.take_expired(lease=30, now=now)
    assert [s.interaction.id for s in taken] == [late.id, later.id]
    assert await store.take_expired(lease=30, now=now + 29) == []  # leased: nobody else takes them meanwhile
    # The worker that took `late` expired it; `later`'s lease lapsed (its worker died before expiring it).
    assert await store.claim(late, EXPIRED) is True
    retaken = await store.take_expired(lease=30, now=now + 31)
    assert [s.interaction.id for s in retaken] == [later.id]
    assert await store.claim(later, EXPIRED) is True
    assert await store.claim(later, EXPIRED) is False  # never expired twice
    assert await store.take_expired(now=now + 500) == []
    assert await store.next_deadline() == future.expires_at
    assert [r.outcome for r in await store.audit_rows(later.id)] == ["expired"]


async def test_two_workers_taking_expired_cards_at_once_never_share_one(pg_target: str, pg_store: SqlStore) -> None:
    store, target = pg_store, pg_target
    now = time.time()
    items = [interaction(expires_at=now - 1) for _ in range(60)]
    for item in items:
        await store.save_interaction(item)
    async with worker(target) as other:
        got: dict[str, list[str]] = {"w1": [], "w2": []}

        async def take(worker: SqlStore) -> None:
            while batch := await worker.take_expired(limit=7, now=now):
                got[worker.worker_id] += [s.interaction.id for s in batch]

        async with anyio.create_task_group() as tg:
            tg.start_soon(take, store)
            tg.start_soon(take, other)
    assert not set(got["w1"]) & set(got["w2"])
    assert sorted(got["w1"] + got["w2"]) == sorted(i.id for i in items)


async def test_a_lapsed_workers_open_work_is_reaped_once_by_a_survivor(target: str, engine: str) -> None:
    now = time.time()
    legacy, modern, done = interaction(), interaction(), interaction()
    dead = await open_store(target, worker_id="dead")
    await dead.save_interaction(legacy)
    await dead.save_pending_call(pending("call-1"))
    await dead.save_interaction(modern, pending_call="call-1", input_key="k")
    await dead.save_interaction(done)
    await dead.claim(done, accepted())
    shown = interaction()  # decided just before dying: maybe before its card was brought to its final state
    await dead.save_interaction(shown)
    await dead.set_card(shown.id, CardRef(shown.id, {"ts": "1.2"}))
    await dead.claim(shown, accepted())
    await dead.heartbeat(lease=30, now=now)
    if engine == "sqlite":
        # One process per file: the next process to open it proves the last one gone (its lock was released).
        await dead.aclose()
        async with worker(target) as survivor:
            reaped = await survivor.reap_workers(now=now + 10)
            assert reaped.workers == ("dead",)
            again = await survivor.reap_workers(now=now + 10)
    else:
        async with worker(target) as survivor, worker(target, "w3") as bystander:
            assert (await survivor.reap_workers(now=now + 10)).workers == ()  # alive: its lease runs to now + 30
            await dead.aclose()  # dies without a word; its lease lapses
            reaped, rival = await survivor.reap_workers(now=now + 31), await bystander.reap_workers(now=now + 31)
            assert reaped.workers == ("dead",) and rival.workers == ()
            assert rival.interactions == () and rival.pending_calls == ()
            again = await survivor.reap_workers(now=now + 31)
    assert [s.interaction.id for s in reaped.interactions] == [legacy.id, modern.id]
    assert [(s.pending_call, s.input_key) for s in reaped.interactions] == [(None, None), ("call-1", "k")]
    assert [c.id for c in reaped.pending_calls] == ["call-1"]
    assert [(s.interaction.id, s.outcome) for s in reaped.decided] == [(shown.id, accepted())]  # `done` has no card
    assert (again.workers, again.interactions, again.pending_calls, again.decided) == ((), (), (), ())


async def test_rows_from_before_workers_existed_are_reaped(store: SqlStore) -> None:
    item = interaction()
    await store.save_interaction(item)
    await store.driver.transaction([Step("UPDATE interactions SET worker = NULL")])
    reaped = await store.reap_workers()
    assert [s.interaction.id for s in reaped.interactions] == [item.id]
    assert (await store.reap_workers()).interactions == ()  # now ours


async def test_a_restart_under_the_same_worker_id_hands_over_the_earlier_processes_work(target: str) -> None:
    item = interaction()
    first = await open_store(target, worker_id="fixed")
    await first.save_interaction(item)
    await first.save_pending_call(pending("call-1"))
    await first.aclose()
    again = await open_store(target, worker_id="fixed")
    try:
        reaped = await again.reap_workers()
        assert [s.interaction.id for s in reaped.interactions] == [item.id]
        assert [c.id for c in reaped.pending_calls] == ["call-1"]
        assert reaped.workers == ()  # the worker itself is alive: it is us
    finally:
        await again.aclose()


async def test_a_card_decided_and_never_shown_final_goes_to_whoever_outlives_its_decider(target: str) -> None:
    posted, shown = interaction(), interaction()
    first = await open_store(target, worker_id="fixed")
    for item in (posted, shown):
        await first.save_interaction(item)
        await first.set_card(item.id, CardRef(item.id, {"ts": item.id}))
        assert await first.claim(item, accepted())
    await first.mark_shown(shown.id)  # the chat edit went through for this one only
    await first.aclose()  # killed before showing the other
    # Restarted under the same id while its lease runs: the earlier process's unshown card is handed over, once.
    again = await open_store(target, worker_id="fixed")
    try:
        reaped = await again.reap_workers()
        assert [s.interaction.id for s in reaped.decided] == [posted.id]
        assert (await again.reap_workers()).decided == ()
        await again.mark_shown(posted.id)
        await again.heartbeat(0)  # and then it dies too: nothing is left to show
    finally:
        await again.aclose()
    async with worker(target, "survivor") as survivor:
        assert (await survivor.reap_workers(now=time.time() + 10)).decided == ()


async def test_a_decision_by_one_worker_is_heard_by_another_pool(pg_target: str, pg_store: SqlStore) -> None:
    store, target = pg_store, pg_target
    items = [interaction() for _ in range(3)]
    for item in items:
        await store.save_interaction(item)
    heard: list[str] = []
    async with worker(target) as other, other.decisions() as stream:
        with anyio.fail_after(patient(30)):
            for item in items:
                await store.claim(item, accepted())
            await store.claim(items[0], accepted())  # lost: no notification
            async for interaction_id in stream:
                heard.append(interaction_id)
                if len(heard) == len(items):
                    break
    assert heard == [i.id for i in items]


async def test_a_forward_waits_in_the_store_until_its_holder_takes_it_once_or_its_sender_takes_it_back(
        pg_target: str, pg_store: SqlStore) -> None:
    # Nobody listens when these are sent: they are kept, not lost.
    first = await pg_store.forward("card-1", "approve 1")
    second = await pg_store.forward("card-1", "approve 2")
    other = await pg_store.forward("card-2", "elsewhere")
    assert first is not None and second is not None and other is not None
    async with worker(pg_target) as holder:
        assert await holder.take_forwarded(["card-1"]) == ["approve 1", "approve 2"]  # in the order sent
        assert await holder.take_forwarded(["card-1"]) == []  # taken once
        assert await pg_store.withdraw_forward(first) is False  # its holder had it
        assert await pg_store.withdraw_forward(other) is True  # nobody had it: it never will
        assert await holder.take_forwarded(["card-2"]) == []
        async with holder.forwarded() as heard:  # the notification names the card only
            await pg_store.forward("card-3", "approve 3")
            with anyio.fail_after(patient(20)):
                assert await anext(aiter(heard)) == "card-3"
        assert await holder.take_forwarded(["card-3"]) == ["approve 3"]


async def test_sqlite_decisions_stream_is_silent(sqlite_store: SqlStore) -> None:
    """One process per SQLite file: decisions are known in process, nothing is sent."""
    store = sqlite_store
    item = interaction()
    await store.save_interaction(item)
    async with store.decisions() as stream:
        await store.claim(item, accepted())
        with anyio.move_on_after(0.2) as scope:
            async for _ in stream:
                pytest.fail("SQLite sends nothing")
        assert scope.cancelled_caught


async def test_sqlite_leadership_is_immediate(sqlite_store: SqlStore) -> None:
    async with sqlite_store.leadership("matrix:@bot:hs") as lease:
        assert not lease.lost.is_set()  # the process lock already makes this the only process


async def test_leadership_is_held_by_one_worker_passes_on_and_is_lost_with_its_session(
        pg_target: str, pg_store: SqlStore, postgres: PostgresCluster) -> None:
    store, target, cluster = pg_store, pg_target, postgres
    order: list[str] = []
    entered, release = anyio.Event(), anyio.Event()
    async with worker(target) as other, await AsyncConnection.connect(target, autocommit=True) as probe:

        async def is_free() -> bool:
            cur = await probe.execute("SELECT pg_try_advisory_lock(%s)", (lock_key("matrix:@bot:hs"),))
            row = await cur.fetchone()
            if row and row[0]:
                await probe.execute("SELECT pg_advisory_unlock(%s)", (lock_key("matrix:@bot:hs"),))
            return bool(row and row[0])

        async def follower() -> None:
            async with other.leadership("matrix:@bot:hs", retry=0.2) as lease:
                order.append("w2 leads")
                entered.set()
                with anyio.fail_after(patient(30)):
                    await release.wait()
                    # Its session is killed: the lock is gone with it, and the lease says so.
                    cluster.psql("SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory'"
                                 " AND granted")
                    await lease.lost.wait()
                order.append("w2 lost the lead")

        with anyio.fail_after(patient(30)):
            async with anyio.create_task_group() as tg:
                async with store.leadership("matrix:@bot:hs", retry=0.2) as lease:
                    order.append("w1 leads")
                    tg.start_soon(follower)
                    assert not await is_free()
                    async with other.leadership("another role", retry=0.2):
                        order.append("w2 leads another role")  # other names do not exclude each other
                    assert not lease.lost.is_set()
                    order.append("w1 steps down")
                await entered.wait()
                assert not await is_free()
                release.set()
            assert await is_free()
    assert order == ["w1 leads", "w2 leads another role", "w1 steps down", "w2 leads", "w2 lost the lead"]
