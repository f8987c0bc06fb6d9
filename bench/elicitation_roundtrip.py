"""The elicitation round trip through the whole bridge, against a bare SDK client, on the same in-process server.

Each round calls a tool that elicits a small form and is answered at once:

* bridge: `host.calls.run` -> session pool -> SDK client -> server elicits -> broker stores the interaction, posts a
  card on a fake chat port, whose person decides `accept` as soon as the card is posted -> the form model checks the
  answer, the broker stores the outcome and its audit row, finishes the card -> the answer goes back to the server
  -> the tool's result. Three paths: `legacy` (2025-11-25: the SDK callback returns the answer while the call stays
  open), `2026 parked` (what the `call` command does on 2026-07-28: the call is stored and parked once its card is
  posted, and the decision continues it on a pooled session; the result is reported in the conversation) and `2026
  waiting` (what the agent does: the call's task waits for the card).
* bare: `mcp.Client(server, mode=..., elicitation_callback=...)` whose callback returns the answer.
* floor: the same bare client whose callback first writes what any decision must (the card's row, then the claim
  with its audit row: `save_interaction`, `claim`, in the bridge's own store) and then returns the answer: the round
  trip of a host that did nothing but its store writes. `floor` / `bare` is the part of the ratio the store alone
  takes, whatever the rest of the bridge does.

Rounds of the two are interleaved (alternating which goes first) so drift hits both alike, once with the store in
memory and once in a file. Prints medians and p90 in milliseconds and the bridge/bare ratios beside the targets; then,
from a few more rounds per side run under a profile hook (`bench.call_count`), the Python calls per round: the
bridge's own (code under `bridge/`) and all of them, beside the bare client's.
Run: `python -m bench.elicitation_roundtrip [--help]`.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from mcp import Client
from mcp.client import ClientRequestContext
from mcp.client.session import ElicitationFnT
from mcp.types import CallToolResult, ElicitRequestParams, ElicitResult, ErrorData

from bench.call_count import Calls, counted
from bench.common import (
    ANSWER,
    SERVER,
    TOOL,
    AnsweringPort,
    answered,
    bench_limits,
    bench_server,
    median,
    ms,
    p90,
    quiet_logs,
)
from bridge.door.model import Outcome, Status
from bridge.host import Host
from bridge.storage import AsyncStore, open_store
from tests.harness.hosts import ALICE, ROOM, config_for, host_for
from tests.storage.support import interaction

MODES = {"legacy": ("legacy", False), "2026 parked": ("auto", True), "2026 waiting": ("auto", False)}
TARGETS = {"memory": 1.3, "file": 2.0}
"""Bridge / bare, median (the "lean where it counts" issue: 1.3x on a `:memory:` store, 2.0x on a file)."""

Round = Callable[[], Awaitable[CallToolResult | str | None]]
"""One round on one side; returns its result (a parked call's as the text it reported)."""


@dataclass
class Row:
    mode: str
    store: str
    bridge_era: str = ""
    bare_era: str = ""
    bridge: list[float] = field(default_factory=list)
    bare: list[float] = field(default_factory=list)
    floor: list[float] = field(default_factory=list)
    cpu: dict[str, float] = field(default_factory=lambda: {"bridge": 0.0, "bare": 0.0, "floor": 0.0})
    failures: int = 0
    refused: int = 0
    calls: dict[str, list[Calls]] = field(default_factory=lambda: {"bridge": [], "bare": []})
    """Python calls per profiled round (after the timed ones), per side."""


async def _bare_answer(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult | ErrorData:
    return ElicitResult(action="accept", content=ANSWER)


def _floor_answer(store: AsyncStore) -> ElicitationFnT:
    """The bare answer after the store writes of one decision: the card's row, then the claim and its audit row."""
    async def answer(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult | ErrorData:
        card = interaction()
        await store.save_interaction(card)
        if not await store.claim(card, Outcome(Status.ACCEPTED, ANSWER, ALICE)):
            return ErrorData(code=-32603, message="the claim was refused")
        return ElicitResult(action="accept", content=ANSWER)

    return answer


async def _timed(call: Round) -> tuple[float, float, CallToolResult | str | None]:
    """Wall time and this process's CPU time (steadier on a busy machine) of one round."""
    start, cpu = time.perf_counter(), time.process_time()
    result = await call()
    return time.perf_counter() - start, time.process_time() - cpu, result


@dataclass
class Sides:
    """The two sides of a row, ready to run rounds."""

    host: Host
    store: AsyncStore
    port: AnsweringPort
    client: Client
    via_bridge: Round
    via_bare: Round
    via_floor: Round


@asynccontextmanager
async def sides(mode: str, store_kind: str, rounds: int, warmup: int, tmp: Path,
                profiled: int = 0, finish_delay: float = 0.0) -> AsyncIterator[Sides]:
    """A host on its own store and a bare client, on one server, for `warmup + rounds + profiled` rounds of
    `mode`; each final card update takes `finish_delay` seconds."""
    protocol, park = MODES[mode]
    server = bench_server()
    store = await open_store(":memory:" if store_kind == "memory" else tmp / f"bridge-{mode.replace(' ', '-')}.db")
    port = AnsweringPort(ALICE, ANSWER, finish_delay=finish_delay)
    limits = bench_limits(warmup + rounds + profiled)  # one form per round, all within a minute
    host, _ = await host_for(config_for({SERVER: server}, server_protocol=protocol, limits=limits), store, port)
    try:
        async with host, Client(server, mode=protocol, elicitation_callback=_bare_answer) as client, \
                Client(server, mode=protocol, elicitation_callback=_floor_answer(store)) as floor, \
                anyio.create_task_group() as tg:
            port.bind(host, tg)
            # As `run` does once started: what start-up made lives as long as the process, so it is kept out of the
            # full collections (one of them, ~40 ms over every module and schema loaded, otherwise lands in whichever
            # side's round happens to trigger it and moves the CPU ratio by a tenth).
            gc.freeze()

            async def via_bridge() -> CallToolResult | str | None:
                result = await host.calls.run(ROOM, ALICE, SERVER, TOOL, {}, park=park)
                if park and result is None:  # parked: its result is reported in the conversation
                    await port.wait_results(1)
                    return port.results[""]
                return result  # (a card answered before its posting returned: the call went on unparked)

            async def via_bare() -> CallToolResult | str | None:
                return await client.call_tool(TOOL, {})

            async def via_floor() -> CallToolResult | str | None:
                return await floor.call_tool(TOOL, {})

            yield Sides(host, store, port, client, via_bridge, via_bare, via_floor)
    finally:
        gc.unfreeze()
        await store.aclose()


async def run_row(mode: str, store_kind: str, rounds: int, warmup: int, tmp: Path, profiled: int = 0,
                  finish_delay: float = 0.0) -> Row:
    out = Row(mode, store_kind)
    async with sides(mode, store_kind, rounds, warmup, tmp, profiled, finish_delay) as two:
        for i in range(warmup + rounds):
            order = [("bridge", two.via_bridge), ("bare", two.via_bare), ("floor", two.via_floor)]
            order = order[i % 3:] + order[:i % 3]  # each side goes first, second and third alike
            for name, call in order:
                elapsed, cpu, result = await _timed(call)
                if not answered(result):
                    out.failures += 1
                if i >= warmup:
                    {"bridge": out.bridge, "bare": out.bare, "floor": out.floor}[name].append(elapsed)
                    out.cpu[name] += cpu
            two.port.forget()
        for _ in range(profiled):  # after the timed rounds: the hook slows every call it sees
            for name, call in (("bridge", two.via_bridge), ("bare", two.via_bare)):
                calls, result = await counted(call)
                if not answered(result):
                    out.failures += 1
                out.calls[name].append(calls)
            two.port.forget()
        session = two.host.pool.find(ROOM, SERVER)
        out.bridge_era = session.protocol_version if session else "?"
        out.bare_era = two.client.protocol_version or "?"
        out.refused = two.port.refused
    return out


def wanted(args: argparse.Namespace) -> list[tuple[str, str]]:
    """The (mode, store) rows the arguments ask for, in the order they are run and printed."""
    modes = [m for m in MODES if args.protocol == "both" or MODES[m][0] == args.protocol]
    stores = ["memory", "file"] if args.store == "both" else [args.store]
    return [(mode, store_kind) for store_kind in stores for mode in modes]


async def main_async(args: argparse.Namespace) -> int:
    quiet_logs()
    rows: list[Row] = []
    level = "NORMAL, one synced commit per decision"  # `bridge.storage.sqlite`
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        for mode, store_kind in wanted(args):
            rows.append(await run_row(mode, store_kind, args.rounds, args.warmup, Path(tmp), args.profiled,
                                      args.finish_delay_ms / 1000))
    print(f"elicitation round trip: {args.rounds} rounds per side after {args.warmup} warm-up rounds; file store: "
          f"SQLite WAL, synchronous={level}")
    if args.finish_delay_ms:
        print(f"each final card update takes {args.finish_delay_ms:g} ms (a slow chat platform)")
    print(f"{'mode':<13} {'store':<7} {'era':<11} {'bridge med':>10} {'p90':>7} {'bare med':>9} {'p90':>7} "
          f"{'ratio med':>9} {'p90':>7} {'cpu':>7} {'target':>7} {'floor':>7}  (ms; cpu: ratio of CPU time; floor: "
          "median of the bare client plus a decision's store writes, over bare)")
    failed = False
    for r in rows:
        era = r.bridge_era if r.bridge_era == r.bare_era else f"{r.bridge_era}/{r.bare_era}"
        print(f"{r.mode:<13} {r.store:<7} {era:<11} {ms(median(r.bridge)):>10} {ms(p90(r.bridge)):>7} "
              f"{ms(median(r.bare)):>9} {ms(p90(r.bare)):>7} {median(r.bridge) / median(r.bare):>8.2f}x "
              f"{p90(r.bridge) / p90(r.bare):>6.2f}x {r.cpu['bridge'] / r.cpu['bare']:>6.2f}x "
              f"{TARGETS[r.store]:>6.1f}x {median(r.floor) / median(r.bare):>6.2f}x")
        if r.failures or r.refused:
            failed = True
            print(f"  ! {r.failures} round(s) did not return the answer, {r.refused} decision(s) not claimed",
                  file=sys.stderr)
    if args.profiled:
        print(f"Python calls per round (median of {args.profiled} profiled rounds per side; this thread, which runs "
              "every task; the store's writer thread not counted)")
        print("  added: the bridge's round less the bare one; the chat stand-in's share (its fake port and person,"
              " `bench.call_count`) is apart, beside it")
        print(f"{'mode':<13} {'store':<7} {'bridge own':>10} {'bridge all':>10} {'stand-in':>9} {'bare all':>9} "
              f"{'added':>7} {'added less stand-in':>20}")
        for r in rows:
            own = median([c.own for c in r.calls["bridge"]])
            every = median([c.all for c in r.calls["bridge"]])
            platform = median([c.platform for c in r.calls["bridge"]])
            bare = median([c.all for c in r.calls["bare"]])
            print(f"{r.mode:<13} {r.store:<7} {own:>10.0f} {every:>10.0f} {platform:>9.0f} {bare:>9.0f} "
                  f"{every - bare:>7.0f} {every - bare - platform:>20.0f}")
    return 1 if failed else 0


def parse_args(argv: list[str] | None = None, *, prog: str = "python -m bench.elicitation_roundtrip",
               description: str = __doc__.split("\n")[0], finish_delay: bool = True) -> argparse.Namespace:
    """The round-trip benches' arguments (`bench.roundtrip_segments` takes the same, but `--finish-delay-ms`)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--protocol", choices=["legacy", "auto", "both"], default="both",
                        help="legacy rows, 2026 rows (auto) or both (default)")
    parser.add_argument("--store", choices=["memory", "file", "both"], default="both",
                        help="the bridge's store: SQLite ':memory:', a file in a temp dir, or both (default)")
    parser.add_argument("--rounds", type=int, default=300, help="timed rounds per side (default 300)")
    parser.add_argument("--warmup", type=int, default=30, help="untimed rounds first (default 30)")
    parser.add_argument("--profiled", type=int, default=5,
                        help="rounds per side counted by a profile hook after the timed ones (default 5; 0: none)")
    if finish_delay:
        parser.add_argument("--finish-delay-ms", type=float, default=0.0,
                            help="how long the fake chat takes to bring a card to its final state (default 0; a "
                                 "real chat.update takes 100-300)")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.warmup < 0 or args.profiled < 0 or getattr(args, "finish_delay_ms", 0) < 0:
        parser.error("--rounds must be at least 1, --warmup, --profiled and --finish-delay-ms at least 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    code: int = anyio.run(main_async, args, backend="asyncio")
    return code


if __name__ == "__main__":
    sys.exit(main())
