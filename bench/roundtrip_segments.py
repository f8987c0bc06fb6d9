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

Each moment of a round is counted once, for the innermost of these it lies in (the round runs one task at a time, so
their intervals nest in time). Means per round, in microseconds; the target's budget is what `(target - 1) x bare`
leaves for everything the bridge adds. The instrumentation wraps a few functions and costs a few microseconds a round
itself (it is counted under `bridge`). Run: `python -m bench.roundtrip_segments [--help]`.
"""

from __future__ import annotations

import argparse
import functools
import gc
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
from mcp import Client

from bench.common import ANSWER, SERVER, TOOL, AnsweringPort, answered, bench_limits, bench_server, quiet_logs
from bench.elicitation_roundtrip import MODES, TARGETS, _bare_answer
from bridge import bounds, rounds, toolcalls
from bridge.storage import open_store
from bridge.testing import ALICE, ROOM, config_for, host_for

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
    patch(bounds.Guarded, "__call__", "bridge")  # the server's request, answered inside the SDK's call
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


async def run_row(mode: str, store_kind: str, rounds_: int, warmup: int, tmp: Path) -> Row:
    protocol, park = MODES[mode]
    out = Row(mode, store_kind)
    server = bench_server()
    store = await open_store(":memory:" if store_kind == "memory" else tmp / f"segments-{mode.replace(' ', '-')}.db")
    port = AnsweringPort(ALICE, ANSWER)
    timeline = Timeline()
    host, _ = await host_for(config_for({SERVER: server}, server_protocol=protocol,
                                        limits=bench_limits(warmup + rounds_)), store, port)
    try:
        async with host, Client(server, mode=protocol, elicitation_callback=_bare_answer) as client, \
                anyio.create_task_group() as tg:
            port.bind(host, tg)
            gc.freeze()  # as `bench.elicitation_roundtrip` does, for the same reason
            with instrumented(timeline, store, port):
                for i in range(warmup + rounds_):
                    order = ["bridge", "bare"] if i % 2 == 0 else ["bare", "bridge"]
                    for side in order:
                        if side == "bare":
                            start = time.perf_counter()
                            result: Any = await client.call_tool(TOOL, {})
                            if i >= warmup:
                                out.bare.append(time.perf_counter() - start)
                        else:
                            timeline.events.clear()
                            timeline.on = True
                            start = time.perf_counter()
                            result = await host.calls.run(ROOM, ALICE, SERVER, TOOL, {}, park=park)
                            if park:
                                await port.wait_results(1)
                                result = port.results[""]
                            end = time.perf_counter()
                            timeline.on = False
                            if i >= warmup:
                                out.bridge.append(end - start)
                                for category, seconds in timeline.split(start, end).items():
                                    out.parts[category].append(seconds)
                        if not answered(result):
                            out.failures += 1
                    port.forget()
    finally:
        gc.unfreeze()
        await store.aclose()
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
    return not failed


async def main_async(args: argparse.Namespace) -> int:
    quiet_logs()
    modes = [m for m in MODES if args.protocol == "both" or MODES[m][0] == args.protocol]
    stores = ["memory", "file"] if args.store == "both" else [args.store]
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        for store_kind in stores:
            for mode in modes:
                rows.append(await run_row(mode, store_kind, args.rounds, args.warmup, Path(tmp)))
    return 0 if report(rows) else 1


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.roundtrip_segments", description=__doc__.split("\n")[0])
    parser.add_argument("--protocol", choices=["legacy", "auto", "both"], default="both",
                        help="legacy rows, 2026 rows (auto) or both (default)")
    parser.add_argument("--store", choices=["memory", "file", "both"], default="both",
                        help="the bridge's store: SQLite ':memory:', a file in a temp dir, or both (default)")
    parser.add_argument("--rounds", type=int, default=300, help="timed rounds per side (default 300)")
    parser.add_argument("--warmup", type=int, default=30, help="untimed rounds first (default 30)")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.warmup < 0:
        parser.error("--rounds must be at least 1 and --warmup at least 0")
    return args


def main(argv: list[str] | None = None) -> int:
    code: int = anyio.run(main_async, parse_args(argv), backend="asyncio")
    return code


if __name__ == "__main__":
    sys.exit(main())
