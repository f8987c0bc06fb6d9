"""A fleet's worst day, repeated: three `mcp-chat-bridge run` workers on one Postgres (4 s lease), Slack in HTTP mode
behind a round-robin balancer (the fake Slack of `tests/harness/slack`), the shared HTTP MCP server of
`tests/servers/fleet_server.py`. Each run posts `--cards` cards (half from a 2026-07-28 server, half from a
2025-11-25 one), clicks each once (accept or decline, `--people` clicks in flight), sends six of the clicks to two
workers at once, and SIGKILLs one worker at a time `--kills` times, each 0-60 ms after a click reached it, restarting
it under the same id 1-5 s later. Clicks that only a killed worker took are clicked again (the person sees the card
still open).

What it counts, per run: tools run twice (the server says `pick <tag> ran` each time it runs with an answer), cards
left showing buttons after they were decided, cards without exactly one final audit row, 2026 calls whose answer went
out and that were neither reported nor told interrupted, and the interrupted calls told. Any of the first four is a
failure: it exits 1.

Run: `python -m bench.fleet_soak` (`--runs 10 --cards 120 --kills 8`).
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx2
from anyio.streams.memory import MemoryObjectSendStream

from adapters.slack import ids
from bridge.door.model import Status
from bridge.storage import SqlStore, open_store
from tests.harness.fleet import Balancer, Worker, finished, logged_mcp_server, post_cards, start_worker
from tests.harness.postgres import PostgresCluster
from tests.harness.slack import Call, FakeSlack, block_actions

INTERRUPTED = "was interrupted after its answers were sent"
SETTLE = 120.0


@dataclass
class Tally:
    twice: int = 0
    buttons_left: int = 0
    audit_wrong: int = 0
    silent: int = 0
    interrupted: int = 0
    failed_legacy: int = 0
    kills: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def bad(self) -> int:
        return self.twice + self.buttons_left + self.audit_wrong + self.silent


async def one_run(run: int, url: str, folder: Path, args: argparse.Namespace) -> Tally:
    rng = random.Random(run)
    tally = Tally()
    async with FakeSlack() as slack, logged_mcp_server() as (mcp_url, server_log), \
            httpx2.AsyncClient(timeout=60) as http:
        slack.users.update({f"U{i}": f"Person {i}" for i in range(args.cards)})
        workers = [await start_worker(folder, f"r{run}w{n}", url, mcp_url, slack.api_url, lease="4s")
                   for n in range(3)]
        lb = Balancer(workers, http)
        threads = [f"1700000002.{i:06d}" for i in range(args.cards)]
        eras = ["new" if i % 2 else "old" for i in range(args.cards)]
        try:
            cards = await post_cards(slack, lb, eras, threads, f"s{run}c")
            values = [next(b for b in c.args["blocks"] if b["type"] == "actions")["elements"][0]["value"]
                      for c in cards]
            actions = [rng.choice([ids.ACCEPT, ids.DECLINE]) for _ in cards]
            doubled = set(rng.sample(range(args.cards), 6))
            # The clicks in `kills + 1` bursts; the first click of each burst but the last brings a kill, and the
            # next burst starts once that worker is back (one worker down at a time).
            bursts = [list(range(args.cards))[k::args.kills + 1] for k in range(args.kills + 1)]

            def payload(i: int) -> dict[str, object]:
                return block_actions(f"U{i}", "C1", cards[i].response["ts"], actions[i], values[i],
                                     block_id=f"{values[i]}.act")

            async def kill_and_restart(name: str) -> None:
                slot = next(k for k, w in enumerate(lb.workers) if w.name == name)
                dead = lb.workers[slot]
                await anyio.sleep(rng.uniform(0, 0.06))  # 0-60 ms after a click reached it
                dead.kill()
                tally.kills += 1
                await anyio.sleep(rng.uniform(1, 5))
                await dead.stop()
                lb.workers[slot] = await start_worker(folder, dead.name, url, mcp_url, slack.api_url, lease="4s")

            async def to(worker: Worker, i: int) -> None:
                with contextlib.suppress(httpx2.HTTPError):  # it died meanwhile
                    await lb.send_to(worker, "interactive", payload(i))

            async def click(i: int, people: anyio.CapacityLimiter, kill: MemoryObjectSendStream[str]) -> None:
                async with people:
                    if i in doubled:  # the same click to two workers at once
                        async with anyio.create_task_group() as both:
                            for worker in [w for w in lb.workers if w.alive][:2]:
                                both.start_soon(to, worker, i)
                        return
                    name = await lb.send("interactive", payload(i))
                    with contextlib.suppress(anyio.WouldBlock, anyio.ClosedResourceError):
                        kill.send_nowait(name)  # only the first click of a burst is taken

            with anyio.fail_after(900):
                for k, burst in enumerate(bursts):
                    send, receive = anyio.create_memory_object_stream[str](1)
                    async with anyio.create_task_group() as tg:
                        people = anyio.CapacityLimiter(args.people)
                        for i in burst:
                            tg.start_soon(click, i, people, send)
                    send.close()
                    with contextlib.suppress(anyio.EndOfStream):
                        first = receive.receive_nowait()
                        if k < args.kills:
                            await kill_and_restart(first)
                    receive.close()
            # Cards still open: their click went down with a worker (acked, never stored). The person clicks again.
            store = await open_store(url, worker_id=f"observer{run}")
            try:
                deadline = time.monotonic() + SETTLE
                while time.monotonic() < deadline:
                    open_ids = {s.interaction.id for s in await store.open_interactions()}
                    if not open_ids:
                        break
                    for i, value in enumerate(values):
                        if value in open_ids:
                            with contextlib.suppress(RuntimeError, httpx2.HTTPError):
                                await lb.send("interactive", payload(i))
                    await anyio.sleep(2.0)
                await tally_run(tally, store, slack, server_log.lines, cards, values, threads, eras, run)
            finally:
                await store.aclose()
        finally:
            for worker in lb.workers:
                await worker.stop()
    return tally


async def tally_run(tally: Tally, store: SqlStore, slack: FakeSlack, server_lines: list[str], cards: list[Call],
                    values: list[str], threads: list[str], eras: list[str], run: int) -> None:
    # Give the last cards time to be shown final (a dead worker's after its lease and the take-over).
    deadline = time.monotonic() + SETTLE
    unshown: list[int] = []
    while time.monotonic() < deadline:
        updates = slack.calls_to("chat.update")
        unshown = [i for i, c in enumerate(cards)
                   if not any(finished(c.response["ts"])(u) and u.ok for u in updates)]
        if not unshown:
            break
        await anyio.sleep(1.0)
    ran = Counter(line.split()[1] for line in server_lines if line.startswith("pick "))
    tally.twice = sum(1 for n in ran.values() if n > 1)
    posts = slack.calls_to("chat.postMessage")
    for i, value in enumerate(values):
        stored = await store.interaction(value)
        rows = [r for r in await store.audit_rows(value) if r.outcome != "approved"]
        if len(rows) != 1:
            tally.audit_wrong += 1
            tally.notes.append(f"card {i}: {len(rows)} audit rows")
        if stored is not None and stored.status is not Status.OPEN and i in unshown:
            tally.buttons_left += 1
            tally.notes.append(f"card {i} ({eras[i]}): {stored.status.value} but shows buttons")
        said = [str(c.args.get("text", "")) for c in posts if c.args.get("thread_ts") == threads[i]]
        if any(INTERRUPTED in t for t in said):
            tally.interrupted += 1
        if eras[i] == "old" and stored is not None and stored.status is Status.FAILED:
            tally.failed_legacy += 1
        tag = f"s{run}c{i}"
        if eras[i] == "new" and ran[tag] and not any(t.startswith("new.pick:") or INTERRUPTED in t for t in said):
            tally.silent += 1
            tally.notes.append(f"card {i}: the server ran it, and the thread heard nothing")


async def main(args: argparse.Namespace) -> int:
    totals: list[Tally] = []
    with PostgresCluster(fsync=True) as cluster, tempfile.TemporaryDirectory() as tmp:
        for run in range(args.runs):
            url = cluster.create_database()
            began = time.perf_counter()
            tally = await one_run(run, url, Path(tmp), args)
            cluster.drop_database(url)
            totals.append(tally)
            print(f"run {run}: {time.perf_counter() - began:5.0f} s, {tally.kills} kills; ran twice {tally.twice}, "
                  f"buttons left {tally.buttons_left}, audit not one {tally.audit_wrong}, untold {tally.silent}; "
                  f"interrupted and told {tally.interrupted}, legacy failed {tally.failed_legacy}", flush=True)
            for note in tally.notes[:20]:
                print(f"  {note}", flush=True)
    bad = sum(t.bad for t in totals)
    print(f"{args.runs} runs of {args.cards} cards: ran twice {sum(t.twice for t in totals)}, buttons left "
          f"{sum(t.buttons_left for t in totals)}, audit not one {sum(t.audit_wrong for t in totals)}, untold "
          f"{sum(t.silent for t in totals)}; interrupted and told {sum(t.interrupted for t in totals)}")
    return 1 if bad else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.fleet_soak")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--cards", type=int, default=120)
    parser.add_argument("--kills", type=int, default=8)
    parser.add_argument("--people", type=int, default=8)
    sys.exit(anyio.run(main, parser.parse_args()))
