"""Where the bridge's time goes in one elicitation round trip, beside the bare SDK client's round on the same server.

The rounds are those of `bench.elicitation_roundtrip` (same server, same fake chat whose person answers at once, the
bridge's and the bare client's rounds interleaved so both run with equally cold caches). Here the bridge's side is
also cut into what it spends its time on, measured inside the round rather than in a loop of its own (a store
statement costs two to four times more in the round than in a tight loop, as the interpreter and SQLite run much
other code in between):

* `sdk`: inside the SDK's `call_tool` (client, in-memory transport, server), less the callback the bridge answers in;
* `store`: inside the store's methods (encoding the rows, the statements, and for a file the hops to its writer
  thread and the sync);
* `chat`: inside the fake chat port (a real platform's cost, not the bridge's; it includes starting the task in which
  the bench's person answers);
* `bridge`: everything else: the call's own bookkeeping, request context, form, card routing, the decision's
  checks, the handoffs between the tasks.

For a file store, a second table splits the store's writes: how long a round awaited them on the event loop, how long
their batches took in the writer thread (the statements and the sync), and so what each hop to the writer and back
cost beyond its commit.

Each moment of a round is counted once, for the innermost of these it lies in (the round runs one task at a time, so
their intervals nest in time). Means per round, in microseconds; the target's budget is what `(target - 1) x bare`
leaves for everything the bridge adds. The instrumentation wraps a few functions and costs a few microseconds a round
itself (it is counted under `bridge`). Run: `python -m bench.roundtrip_segments [--help]`.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from bench.common import AnsweringPort, answered, quiet_logs
from bench.elicitation_roundtrip import TARGETS, parse_args, sides, wanted
from bridge.calls import rounds, toolcalls
from bridge.requests import limiting

CATEGORIES = ("sdk", "store", "chat", "bridge")
PORT_METHODS = ("post_card", "finish_card", "update_card", "send", "notify", "post_status", "update_status")


@dataclass
class Timeline:
    """Entries and exits of the instrumented functions during one round: (time, entry number, category; None for an
    exit)."""

    events: list[tuple[float, int, str | None]] = field(default_factory=list)
    on: bool = False
    _count: int = 0

    def enter(self, category: str) -> int:
        self._count += 1
        if self.on:
            self.events.append((time.perf_counter(), self._count, category))
        return self._count

    def leave(self, entry: int) -> None:
        if self.on:
            self.events.append((time.perf_counter(), entry, None))

    def split(self, start: float, end: float) -> dict[str, float]:
        """Seconds of [start, end] by the innermost open category (`bridge` when none is open). An exit whose entry
        came before the round (work the previous round left running) is ignored."""
        out = dict.fromkeys(CATEGORIES, 0.0)
        open_: dict[int, str] = {}  # in the order entered: the last is the innermost
        last = start
        for at, entry, category in self.events:
            out[next(reversed(open_.values())) if open_ else "bridge"] += at - last
            last = at
            if category is None:
                open_.pop(entry, None)
            else:
                open_[entry] = category
        out[next(reversed(open_.values())) if open_ else "bridge"] += end - last
        return out


def _timed_async(timeline: Timeline, category: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        entry = timeline.enter(category)
        try:
            return await fn(*args, **kwargs)
        finally:
            timeline.leave(entry)
    return wrapper


@dataclass
class Hops:
    """The store's writes during the rounds measured: awaited on the loop (`transaction`) and committed in the writer
    thread (`_commit`, whichever thread runs it), in seconds, with the count of each."""

    on: bool = False
    awaited: float = 0.0
    writes: int = 0
    committed: float = 0.0
    batches: int = 0


def _hops_counted(hops: Hops, driver: Any) -> Callable[[], None]:
    """Wrap the driver's `transaction` and its class's `_commit` (runs in the writer thread); returns the undo."""
    transaction, commit = driver.transaction, type(driver)._commit

    async def timed_transaction(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return await transaction(*args, **kwargs)
        finally:
            if hops.on:
                hops.awaited += time.perf_counter() - t
                hops.writes += 1

    def timed_commit(self: Any, *args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return commit(self, *args, **kwargs)
        finally:
            if hops.on:
                hops.committed += time.perf_counter() - t
                hops.batches += 1

    driver.transaction = timed_transaction
    type(driver)._commit = timed_commit

    def undo() -> None:
        del driver.transaction
        type(driver)._commit = commit
    return undo


@contextmanager
def instrumented(timeline: Timeline, store: object, port: AnsweringPort) -> Iterator[None]:
    """Wrap the SDK's call, the bridge's callback (the time inside it is the bridge's again), the store's methods
    and the chat port's, for as long as the block runs."""
    saved: list[tuple[object, str, Any]] = []

    def patch(owner: object, name: str, category: str) -> None:
        original = getattr(owner, name)
        saved.append((owner, name, original))
        setattr(owner, name, _timed_async(timeline, category, original))

    patch(rounds, "guarded", "sdk")  # the 2026 rounds look it up in their module at each call
    patch(toolcalls, "guarded", "sdk")  # legacy calls, imported by name
    patch(limiting.Guarded, "__call__", "bridge")  # the server's request, answered inside the SDK's call
    for name, _ in inspect.getmembers(type(store), inspect.iscoroutinefunction):
        if not name.startswith("_"):
            patch(store, name, "store")
    for name in PORT_METHODS:
        patch(port, name, "chat")
    try:
        yield
    finally:
        for owner, name, original in reversed(saved):
            if isinstance(owner, type) or inspect.ismodule(owner):
                setattr(owner, name, original)
            else:
                delattr(owner, name)  # the instance's wrapper goes; the class's method shows again


@dataclass
class Row:
    mode: str
    store: str
    parts: dict[str, list[float]] = field(default_factory=lambda: {c: [] for c in CATEGORIES})
    bridge: list[float] = field(default_factory=list)
    bare: list[float] = field(default_factory=list)
    failures: int = 0
    hops: Hops = field(default_factory=Hops)


async def run_row(mode: str, store_kind: str, rounds_: int, warmup: int, tmp: Path) -> Row:
    out = Row(mode, store_kind)
    timeline = Timeline()
    async with sides(mode, store_kind, rounds_, warmup, tmp) as two:
        driver = getattr(two.store, "driver", None)
        undo = _hops_counted(out.hops, driver) if store_kind == "file" and driver is not None else None
        with instrumented(timeline, two.store, two.port):
            for i in range(warmup + rounds_):
                for side in ["bridge", "bare"] if i % 2 == 0 else ["bare", "bridge"]:
                    timeline.events.clear()
                    timeline.on = side == "bridge"
                    out.hops.on = timeline.on and i >= warmup
                    start = time.perf_counter()
                    result = await (two.via_bridge() if side == "bridge" else two.via_bare())
                    end = time.perf_counter()
                    timeline.on = out.hops.on = False
                    if not answered(result):
                        out.failures += 1
                    if i < warmup:
                        continue
                    if side == "bare":
                        out.bare.append(end - start)
                        continue
                    out.bridge.append(end - start)
                    for category, seconds in timeline.split(start, end).items():
                        out.parts[category].append(seconds)
                two.port.forget()
        if undo is not None:
            undo()
    return out


def us(seconds: float) -> str:
    return f"{seconds * 1e6:.0f}"


def report(rows: list[Row]) -> bool:
    print("Where a round's time goes, in µs (means per round; median round beside them). `added`: the bridge's "
          "round less the bare one; `budget`: what the target leaves for it.")
    print(f"{'mode':<13} {'store':<7} {'bare':>6} {'bridge':>7} {'added':>6} {'budget':>7}   "
          f"{'sdk':>5} {'(-bare)':>7} {'store':>6} {'chat':>5} {'bridge':>7}   {'median ratio':>12}")
    failed = False
    for r in rows:
        mean = {c: statistics.fmean(v) for c, v in r.parts.items()}
        bare, total = statistics.fmean(r.bare), statistics.fmean(r.bridge)
        budget = (TARGETS[r.store] - 1) * bare
        print(f"{r.mode:<13} {r.store:<7} {us(bare):>6} {us(total):>7} {us(total - bare):>6} {us(budget):>7}   "
              f"{us(mean['sdk']):>5} {us(mean['sdk'] - bare):>7} {us(mean['store']):>6} {us(mean['chat']):>5} "
              f"{us(mean['bridge']):>7}   "
              f"{statistics.median(r.bridge) / statistics.median(r.bare):>11.2f}x")
        if r.failures:
            failed = True
            print(f"  ! {r.failures} round(s) did not return the answer", file=sys.stderr)
    hopped = [r for r in rows if r.hops.writes]
    if hopped:
        print("The file store's awaited writes, per round (µs): awaited on the loop, committed in the writer thread, "
              "and per write what the hop added beyond its commit.")
        print(f"{'mode':<13} {'writes':>7} {'batches':>8} {'awaited':>8} {'in thread':>10} {'per hop':>8}")
        for r in hopped:
            h, n = r.hops, len(r.bridge)
            print(f"{r.mode:<13} {h.writes / n:>7.2f} {h.batches / n:>8.2f} {us(h.awaited / n):>8} "
                  f"{us(h.committed / n):>10} {us((h.awaited - h.committed) / h.writes):>8}")
    return not failed


async def main_async(args: argparse.Namespace) -> int:
    quiet_logs()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        for mode, store_kind in wanted(args):
            rows.append(await run_row(mode, store_kind, args.rounds, args.warmup, Path(tmp)))
    return 0 if report(rows) else 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv, prog="python -m bench.roundtrip_segments", description=__doc__.split("\n")[0],
                      finish_delay=False)
    code: int = anyio.run(main_async, args, backend="asyncio")
    return code


if __name__ == "__main__":
    sys.exit(main())
