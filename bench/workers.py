"""Decisions per second and decision latency with several bridge workers: 1, 2 and 3 workers on one Postgres, and
one process on SQLite, in the same run.

Each configuration runs real `mcp-chat-bridge run` processes (Slack in HTTP mode against the fake Slack of
`tests/harness/slack`, running in this process) and the shared HTTP MCP server of `tests/servers/fleet_server.py`, the
harness of the multi-worker test (`tests/harness/fleet.py`). `--cards` calls are started (half legacy, half 2026, spread
over the workers, each asked by a different person, as on a team), and once every card is posted, one click per card is
sent through the round-robin balancer with `--concurrency` clicks in flight. A decision's latency runs from sending its
click to the card's final state arriving at Slack (`chat.update`: the bridge shows a decision only once it is stored),
so it covers the ack, the claim (one synced commit), a forwarded hop for a legacy card clicked on another worker, and
finishing the card. Decisions per second: cards over the time from the first click to the last final card. Setting the
cards up is not timed. Postgres runs with fsync on, as SQLite syncs. Every card must end decided; otherwise it exits 1.

Run: `python -m bench.workers` (`--cards 200 --concurrency 32`).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx2
import psycopg

from adapters.slack import ids
from tests.harness.fleet import Balancer, finished, mcp_server, post_cards, running, start_worker
from tests.harness.postgres import PostgresCluster
from tests.harness.slack import Call, FakeSlack, block_actions


class Finals:
    """When each card's final state reaches the fake Slack, seen as it is recorded (waiting through
    `FakeSlack.wait_for_call` would rescan every call for every waiter: the bench's own cost, not the bridge's)."""

    def __init__(self, slack: FakeSlack) -> None:
        self.events: dict[str, anyio.Event] = {}
        record = slack._record  # the fake's one hook on every call

        async def recorded(call: Call) -> None:
            await record(call)
            if call.method == "chat.update" and finished(str(call.args.get("ts")))(call):
                self.event(str(call.args["ts"])).set()

        slack._record = recorded  # type: ignore[method-assign]

    def event(self, ts: str) -> anyio.Event:
        return self.events.setdefault(ts, anyio.Event())


async def server_counts(url: str) -> tuple[int, int]:
    """The database's committed transactions and the cluster's WAL syncs, as the server has them so far."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        xacts = await (await conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
                                          )).fetchone()
        syncs = await (await conn.execute("SELECT wal_sync FROM pg_stat_wal")).fetchone()
    assert xacts is not None and syncs is not None
    return int(xacts[0]), int(syncs[0])


async def run_one(label: str, store: str, workers_n: int, cards_n: int, concurrency: int,
                  folder: Path) -> tuple[str, float, list[float]]:
    async with FakeSlack() as slack, mcp_server() as mcp_url, httpx2.AsyncClient(timeout=60) as http:
        slack.users.update({f"U{i}": f"Person {i}" for i in range(cards_n)})
        finals = Finals(slack)
        names = [f"{label}-w{n}" for n in range(workers_n)]
        async with running(names, lambda name: start_worker(folder, name, store, mcp_url, slack.api_url,
                                                            lease="60s")) as workers:
            lb = Balancer(workers, http)
            threads = [f"1700000001.{i:06d}" for i in range(cards_n)]
            with anyio.fail_after(600):
                cards = await post_cards(slack, lb, ["old" if i % 2 == 0 else "new" for i in range(cards_n)],
                                         threads, "b")
            latencies: list[float] = []
            clicks = anyio.CapacityLimiter(concurrency)

            async def click(i: int) -> None:
                async with clicks:
                    actions = next(b for b in cards[i].args["blocks"] if b["type"] == "actions")
                    interaction_id = actions["elements"][0]["value"]
                    ts = cards[i].response["ts"]
                    started = time.perf_counter()
                    await lb.send("interactive", block_actions(f"U{i}", "C1", ts, ids.ACCEPT, interaction_id,
                                                               block_id=f"{interaction_id}.act"))
                    await finals.event(ts).wait()
                    latencies.append(time.perf_counter() - started)

            began = time.perf_counter()
            with anyio.fail_after(600):
                async with anyio.create_task_group() as tg:
                    for i in range(cards_n):
                        tg.start_soon(click, i)
            elapsed = time.perf_counter() - began
    return label, cards_n / elapsed, latencies


def line(label: str, rate: float, latencies: list[float]) -> str:
    q = statistics.quantiles(sorted(latencies), n=100)
    return (f"{label:<26} {rate:>10.1f} {statistics.median(latencies) * 1000:>9.0f} {q[89] * 1000:>9.0f} "
            f"{q[98] * 1000:>9.0f}")


async def main(args: argparse.Namespace) -> int:
    results = []
    counts: list[tuple[int, int]] = []
    with PostgresCluster(fsync=True) as cluster, tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        results.append(await run_one("SQLite, 1 process", str(folder / "bench.db"), 1, args.cards,
                                     args.concurrency, folder))
        for n in (1, 2, 3):
            url = cluster.create_database()
            before = await server_counts(url)
            results.append(await run_one(f"Postgres, {n} worker{'s' if n > 1 else ''}", url, n, args.cards,
                                         args.concurrency, folder))
            # Read once the workers are gone: a session reports its counts when it ends, at the latest.
            after = await server_counts(url)
            counts.append((after[0] - before[0], after[1] - before[1]))
            cluster.drop_database(url)
    print(f"workers: {args.cards} cards (half legacy, half 2026), one click each, {args.concurrency} in flight")
    print(f"{'store, workers':<26} {'decisions/s':>10} {'p50 ms':>9} {'p90 ms':>9} {'p99 ms':>9}")
    for label, rate, latencies in results:
        if len(latencies) != args.cards:
            print(f"{label}: only {len(latencies)} of {args.cards} decisions completed", file=sys.stderr)
            return 1
        print(line(label, rate, latencies))
    # Issue 24's figure: one Postgres worker against one SQLite process, in the same run.
    # What each card cost the database over its whole life (its call, the card, the click, the final card), the
    # workers' start and stop included.
    print("Postgres, per card: " + ", ".join(f"{n} worker{'s' if n > 1 else ''} {x / args.cards:.2f} transactions"
                                             f" {w / args.cards:.2f} WAL syncs" for n, (x, w) in
                                             zip((1, 2, 3), counts, strict=True)))
    print(f"SQLite / Postgres 1 worker: {results[0][1] / results[1][1]:.2f}x (target: at most 1.5x)")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.workers")
    parser.add_argument("--cards", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=32)
    sys.exit(anyio.run(main, parser.parse_args()))
