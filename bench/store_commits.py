"""Synced commits and latency per decision: the old synchronous store (formerly `bridge.store`, kept in
`tests/harness/legacy_store.py`) beside the SQLite engine.

A decision is the store writes the bridge makes for one card, per era:

* legacy (2025-11-25): store the interaction, store its card, record the outcome with its audit row;
* 2026-07-28: the same between storing the pending call and deleting it.

For each store and era, `--decisions` decisions one after another (a checkpoint between writes, as the bridge awaits
the chat platform between them), in one process:

* **synced commits per decision**: today's store commits every write with `synchronous=FULL` (a commit counter on
  its connection's statement trace); the new engine counts its durable commits;
* **fsync/fdatasync per decision** (unless `--no-strace` or strace is missing): the same run in a child process under
  `strace -f`, minus a run with no decisions, divided by the decisions: what the disk actually saw, checkpoints
  included;
* the **decision's commit** (finishing the interaction with its audit row) and the **whole decision**, median and
  p90, and how long the **event loop was blocked** per decision (a 1 ms ticker's lateness, summed);
* a **burst**: `--burst` decisions at once (2026 era), wall time and synced commits per decision (group commit);
* **the core's path**: a `Host` on a SQLite file store runs `--core` real tool calls against an inline server, each
  asking one form that a person accepts the moment it is posted (legacy: the call waits; 2026: the call is parked
  and continued after the decision; 2026 waiting: the agent's way, the call waits for the card), and the store's
  synced commits are counted per decision: the decision's claim should be the only one (it also records, for a 2026
  call, that the round's answers go out: `AsyncStore.claim_parked`).

Run: `python -m bench.store_commits [--help]`.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Protocol

import anyio
import anyio.lowlevel

from bench.common import ANSWER, SERVER, TOOL, AnsweringPort, answered, bench_limits, bench_server, quiet_logs
from bench.store_restart import item
from bridge.door.model import CardRef, Interaction, Outcome, Status
from bridge.storage import PendingCall, SqlStore, open_store
from tests.harness.hosts import ALICE, ROOM, config_for, host_for
from tests.harness.legacy_store import Store

ENGINES = ("old", "new")
ERAS = ("legacy", "2026")


class Decisions(Protocol):
    @property
    def synced(self) -> int: ...


    async def decide(self, n: int, era: str) -> float: ...
    async def close(self) -> None: ...


def call(n: int) -> PendingCall:
    return PendingCall(f"call-{n}", ROOM, "srv", "book", {"tag": str(n)}, "state", {"k": {"method": "x"}}, ALICE)


def card(n: int) -> Interaction:
    return item(f"i-{n}-{time.monotonic_ns()}", time.time() + 600)


ACCEPTED = Outcome(Status.ACCEPTED, {"n": 3}, ALICE)


class Old:
    """Today's store, synchronous, on the event loop."""

    def __init__(self, path: Path) -> None:
        self.store = Store(path)
        self._commits = 0
        db = self.store._db  # counting its commits from outside: the class has no hook for it

        def trace(statement: str) -> None:
            verb = statement.lstrip().split(None, 1)[0].upper()
            if verb == "COMMIT" or (verb in {"INSERT", "UPDATE", "DELETE", "REPLACE"} and not db.in_transaction):
                self._commits += 1

        db.set_trace_callback(trace)

    @property
    def synced(self) -> int:
        return self._commits  # synchronous=FULL: every commit is synced

    async def decide(self, n: int, era: str) -> float:
        interaction = card(n)
        if era == "2026":
            self.store.save_pending_call(call(n))
            await anyio.lowlevel.checkpoint()
        self.store.save_interaction(interaction, pending_call=call(n).id if era == "2026" else None, input_key="k")
        await anyio.lowlevel.checkpoint()
        self.store.set_card(interaction.id, CardRef(interaction.id, {"ts": str(n)}))
        await anyio.lowlevel.checkpoint()
        t = time.perf_counter()
        self.store.finish_interaction(interaction, ACCEPTED)
        commit = time.perf_counter() - t
        await anyio.lowlevel.checkpoint()
        if era == "2026":
            self.store.delete_pending_call(call(n).id)
        return commit

    async def close(self) -> None:
        self.store.close()


class New:
    """The new engine: writes in its writer thread, one synced commit per decision."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store

    @property
    def synced(self) -> int:
        return self.store.durable_commits

    async def decide(self, n: int, era: str) -> float:
        interaction = card(n)
        if era == "2026":
            await self.store.save_pending_call(call(n))
        await self.store.save_interaction(interaction, pending_call=call(n).id if era == "2026" else None,
                                          input_key="k")
        await self.store.set_card(interaction.id, CardRef(interaction.id, {"ts": str(n)}))
        t = time.perf_counter()
        await self.store.claim(interaction, ACCEPTED)
        commit = time.perf_counter() - t
        if era == "2026":
            await self.store.delete_pending_call(call(n).id)
        return commit

    async def close(self) -> None:
        await self.store.aclose()


async def opened(engine: str, path: Path) -> Decisions:
    return Old(path) if engine == "old" else New(await open_store(path, worker_id="bench"))


class Stalls:
    """How late a 1 ms ticker was woken, summed: how long the event loop could not run anything else (on a busy
    machine this includes the waits for a CPU, on both sides)."""

    def __init__(self) -> None:
        self.total = 0.0

    async def run(self) -> None:
        while True:
            t = time.perf_counter()
            await anyio.sleep(0.001)
            self.total += max(0.0, time.perf_counter() - t - 0.001)


def ms(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q * 100) - 1] * 1000 if len(values) > 1 else values[0] * 1000


async def sequential(engine: str, era: str, path: Path, decisions: int) -> str:
    store = await opened(engine, path)
    stalls = Stalls()
    commits: list[float] = []
    wholes: list[float] = []
    try:
        for n in range(5):  # warm-up
            await store.decide(-1 - n, era)
        before = store.synced
        async with anyio.create_task_group() as tg:
            tg.start_soon(stalls.run)
            for n in range(decisions):
                t = time.perf_counter()
                commits.append(await store.decide(n, era))
                wholes.append(time.perf_counter() - t)
            tg.cancel_scope.cancel()
        synced = (store.synced - before) / decisions
    finally:
        await store.close()
    return (f"{synced:>8.2f} {ms(commits, .5):>8.2f} {ms(commits, .9):>8.2f} {ms(wholes, .5):>8.2f} "
            f"{ms(wholes, .9):>8.2f} {stalls.total * 1000 / decisions:>9.2f}")


async def burst(engine: str, path: Path, size: int) -> str:
    store = await opened(engine, path)
    try:
        before = store.synced
        t = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for n in range(size):
                tg.start_soon(store.decide, n, "2026")
        took = time.perf_counter() - t
        return f"{(store.synced - before) / size:>8.2f} synced commits per decision, all {size} in {took * 1000:.1f} ms"
    finally:
        await store.close()


CORE = {"legacy": ("legacy", False), "2026 parked": ("auto", True), "2026 waiting": ("auto", False)}
"""The core path's modes: protocol, and whether the call is parked (the `call` command) or waited on (the agent)."""


async def core_path(era: str, path: Path, decisions: int) -> str:
    """Real calls through a `Host` on the file store: synced commits per decision, and the whole call's median."""
    store = await open_store(path, worker_id="bench")
    port = AnsweringPort(ALICE, ANSWER)
    protocol, park = CORE[era]
    config = config_for({SERVER: bench_server()}, server_protocol=protocol, limits=bench_limits(decisions + 5))
    host, _ = await host_for(config, store, port)
    wholes: list[float] = []
    failures = 0
    try:
        async with host, anyio.create_task_group() as tg:
            port.bind(host, tg)

            async def one() -> bool:
                result = await host.calls.run(ROOM, ALICE, SERVER, TOOL, {}, park=park)
                if park:
                    await port.wait_results(1)
                    ok = answered(port.results[""])
                else:
                    ok = answered(result)
                port.forget()
                return ok

            for _ in range(5):  # warm-up
                await one()
            before = store.durable_commits
            for _ in range(decisions):
                t = time.perf_counter()
                failures += not await one()
                wholes.append(time.perf_counter() - t)
            synced = (store.durable_commits - before) / decisions
            tg.cancel_scope.cancel()
    finally:
        await store.aclose()
    failed = f"  ! {failures} call(s) without their answer, {port.refused} decision(s) not claimed" \
        if failures or port.refused else ""
    return f"{synced:>8.2f} synced commits per decision, whole call median {ms(wholes, .5):.2f} ms{failed}"


def syncs_per_decision(engine: str, era: str, folder: Path, decisions: int) -> float:
    """fsync + fdatasync calls per decision, from strace, minus a run with no decisions."""
    counts = []
    for n in (decisions, 0):
        out = folder / f"strace-{engine}-{era}-{n}.txt"
        db = folder / f"strace-{engine}-{era}-{n}.db"
        subprocess.run(["strace", "-f", "-qq", "-e", "trace=fsync,fdatasync", "-o", str(out), sys.executable, "-m",
                        "bench.store_commits", "--child", engine, era, str(n), str(db)], check=True,
                       cwd=Path(__file__).resolve().parents[1])
        counts.append(sum(1 for line in out.read_text().splitlines() if "sync(" in line))
    return (counts[0] - counts[1]) / decisions


async def child(engine: str, era: str, decisions: int, path: Path) -> None:
    store = await opened(engine, path)
    for n in range(decisions):
        await store.decide(n, era)
    await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--decisions", type=int, default=300)
    parser.add_argument("--burst", type=int, default=50)
    parser.add_argument("--no-strace", action="store_true")
    parser.add_argument("--core", type=int, default=100, help="real calls through a Host per era (0: skip)")
    parser.add_argument("--child", nargs=4, metavar=("ENGINE", "ERA", "N", "DB"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    quiet_logs()
    if args.child:
        engine, era, n, db = args.child
        anyio.run(child, engine, era, int(n), Path(db))
        return
    strace = not args.no_strace and shutil.which("strace") is not None
    print(f"store commits: {args.decisions} decisions per line, one after another; SQLite {sqlite3.sqlite_version}")
    print(f"{'store, era':<30} {'synced':>8} {'commit':>8} {'p90':>8} {'whole':>8} {'p90':>8} {'blocked':>9}"
          f"{'  fsyncs (strace)' if strace else ''}")
    print(f"{'':<30} {'/decis.':>8} {'ms':>8} {'ms':>8} {'ms':>8} {'ms':>8} {'ms/dec.':>9}")
    with tempfile.TemporaryDirectory(prefix="bench-commits-") as tmp:
        folder = Path(tmp)
        for era in ERAS:
            for engine in ENGINES:
                label = f"{'bridge.store (old)' if engine == 'old' else 'bridge.storage'}, {era}"
                row = anyio.run(sequential, engine, era, folder / f"{engine}-{era}.db", args.decisions)
                extra = f"  {syncs_per_decision(engine, era, folder, args.decisions):>8.2f}" if strace else ""
                print(f"{label:<30} {row}{extra}")
        for engine in ENGINES:
            label = "bridge.store (old)" if engine == "old" else "bridge.storage"
            print(f"burst {label:<24} {anyio.run(burst, engine, folder / f'burst-{engine}.db', args.burst)}")
        for n, era in enumerate(CORE if args.core else ()):
            label = f"core: Host, {era}"
            print(f"{label:<30} {anyio.run(core_path, era, folder / f'core-{n}.db', args.core, backend='asyncio')}")


if __name__ == "__main__":
    main()
