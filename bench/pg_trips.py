"""The Postgres store alone: what one card costs the database, from its posting to its decision shown final.

Each card is the store's part of a real one, half legacy and half 2026 parked, as `bench.workers` clicks them: the
call's running record and its end, (2026: the stored round), the card's row, its reference, the synced claim, (2026:
the synced record that the round went out, and the round's delete), the card shown final. `--cards` cards with
`--concurrency` in flight, through one worker's store (its pool) on a throwaway cluster with fsync on. Printed: cards
per second, and from the server's own counters (read after the store is closed, when every session has reported)
transactions committed (`pg_stat_database.xact_commit`) and WAL syncs (`pg_stat_wal.wal_sync`) per card.

Run: `python -m bench.pg_trips` (`--cards 400 --concurrency 32`). Against another tree's store, run it from that
tree's root with `PYTHONPATH=.` and this file's path.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid

import anyio
import psycopg

from bridge.door.model import CardRef, Outcome, Status
from bridge.storage import open_store
from bridge.storage.sqlstore import SqlStore
from tests.harness.hosts import ALICE, ROOM
from tests.harness.postgres import PostgresCluster
from tests.storage.support import interaction, pending


async def card(store: SqlStore, n: int) -> None:
    call = f"call-{n}-{uuid.uuid4().hex[:8]}"
    item = interaction()
    await store.record_running_call(call, ROOM, "srv", "tool")
    if n % 2:
        round_ = pending(call)
        await store.save_pending_call(round_)
        await store.save_interaction(item, pending_call=call, input_key="k", parked=True)
    else:
        await store.save_interaction(item)
    await store.set_card(item.id, CardRef(item.id, {"ts": f"1.{n}"}))
    outcome = Outcome(Status.ACCEPTED, {"n": 3}, ALICE)
    if n % 2:
        won, last = await store.claim_parked(item, outcome, "", call)
        assert won and last
        stored = await store.pending_call(call)
        assert stored is not None
        assert await store.send_round(call, stored.created_at)
        await store.delete_pending_call(call)
    else:
        assert await store.claim(item, outcome)
    await store.mark_shown(item.id)
    await store.end_running_call(call)


async def counters(url: str) -> tuple[int, int]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        xacts = await (await conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
                                          )).fetchone()
        syncs = await (await conn.execute("SELECT wal_sync FROM pg_stat_wal")).fetchone()
    assert xacts is not None and syncs is not None
    return int(xacts[0]), int(syncs[0])


async def main(args: argparse.Namespace) -> int:
    with PostgresCluster(fsync=True) as cluster:
        url = cluster.create_database()
        store = await open_store(url, worker_id="bench")
        await store.aclose()  # migrated: not counted
        xacts, syncs = await counters(url)
        store = await open_store(url, worker_id="bench")
        slots = anyio.Semaphore(args.concurrency)

        took: list[float] = []

        async def one(n: int) -> None:
            async with slots:
                started = time.perf_counter()
                await card(store, n)
                took.append(time.perf_counter() - started)

        cpu = time.process_time()
        began = time.perf_counter()
        async with anyio.create_task_group() as tg:
            tg.start_soon(store.upkeep)
            async with anyio.create_task_group() as cards:
                for n in range(args.cards):
                    cards.start_soon(one, n)
            elapsed = time.perf_counter() - began
            cpu = time.process_time() - cpu
            tg.cancel_scope.cancel()
        await store.aclose()
        after_xacts, after_syncs = await counters(url)
        audited = len(await (await open_store(url, worker_id="check")).audit_rows())
    if audited != args.cards:
        print(f"only {audited} of {args.cards} decisions audited", file=sys.stderr)
        return 1
    # Each counter read is one transaction of its own; the store's open and close a few: within 0.05 a card here.
    print(f"pg_trips: {args.cards} cards (half legacy, half 2026 parked), {args.concurrency} in flight, one worker")
    print(f"cards/s {args.cards / elapsed:.1f}   transactions/card {(after_xacts - xacts) / args.cards:.2f}"
          f"   WAL syncs/card {(after_syncs - syncs) / args.cards:.2f}   client CPU ms/card"
          f" {cpu * 1000 / args.cards:.2f}   card p50 ms {statistics.median(took) * 1000:.1f}")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.pg_trips")
    parser.add_argument("--cards", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=32)
    sys.exit(anyio.run(main, parser.parse_args()))
