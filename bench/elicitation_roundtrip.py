"""The elicitation round trip through the whole bridge, against a bare SDK client, on the same in-process server.

Each round calls a tool that elicits a small form and is answered at once:

* bridge: `host.calls.run` -> session pool -> SDK client -> server elicits -> broker stores the interaction, posts a
  card on a fake chat port, whose person decides `accept` as soon as the card is posted -> the broker validates the
  answer against the form, stores the outcome and its audit row, finishes the card -> the answer goes back to the
  server (legacy: the callback returns; 2026: the host's own `input_required` driver stores the pending call and
  retries) -> the tool's result.
* bare: `mcp.Client(server, mode=..., elicitation_callback=...)` whose callback returns the answer.

Rounds of the two are interleaved (alternating which goes first) so drift hits both alike. Prints medians and p90 in
milliseconds and the bridge/bare ratio per protocol era. Run: `python -m bench.elicitation_roundtrip [--help]`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from mcp import Client
from mcp.client import ClientRequestContext
from mcp.types import CallToolResult, ElicitRequestParams, ElicitResult, ErrorData

from bench.common import (
    ANSWER,
    SERVER,
    TOOL,
    AnsweringPort,
    answered,
    bench_server,
    median,
    ms,
    p90,
    quiet_logs,
)
from bridge.storage import open_store
from bridge.testing import ALICE, ROOM, config_for, host_for


@dataclass
class EraResult:
    protocol: str
    bridge_era: str = ""
    bare_era: str = ""
    bridge: list[float] = field(default_factory=list)
    bare: list[float] = field(default_factory=list)
    failures: int = 0
    refused: int = 0


async def _bare_answer(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult | ErrorData:
    return ElicitResult(action="accept", content=ANSWER)


async def _timed(call: Callable[[], Awaitable[CallToolResult | None]]) -> tuple[float, CallToolResult | None]:
    start = time.perf_counter()
    result = await call()
    return time.perf_counter() - start, result


async def run_era(protocol: str, rounds: int, warmup: int, store_path: str) -> EraResult:
    out = EraResult(protocol)
    server = bench_server()
    store = await open_store(store_path)
    port = AnsweringPort(ALICE, ANSWER)
    host, _ = await host_for(config_for({SERVER: server}, server_protocol=protocol), store, port)
    try:
        async with host, Client(server, mode=protocol, elicitation_callback=_bare_answer) as client, \
                anyio.create_task_group() as tg:
            port.bind(host, tg)

            async def via_bridge() -> CallToolResult | None:
                return await host.calls.run(ROOM, ALICE, SERVER, TOOL, {})

            async def via_bare() -> CallToolResult | None:
                return await client.call_tool(TOOL, {})

            for i in range(warmup + rounds):
                order = [("bridge", via_bridge), ("bare", via_bare)]
                if i % 2:
                    order.reverse()
                for name, call in order:
                    elapsed, result = await _timed(call)
                    if not answered(result):
                        out.failures += 1
                    if i >= warmup:
                        (out.bridge if name == "bridge" else out.bare).append(elapsed)
                port.forget()
            session = host.pool.find(ROOM, SERVER)
            out.bridge_era = session.protocol_version if session else "?"
            out.bare_era = client.protocol_version or "?"
            out.refused = port.refused
    finally:
        await store.aclose()
    return out


async def main_async(args: argparse.Namespace) -> int:
    quiet_logs()
    eras = ["legacy", "auto"] if args.protocol == "both" else [args.protocol]
    results: list[EraResult] = []
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        for protocol in eras:
            path = ":memory:" if args.store == "memory" else str(Path(tmp) / f"bridge-{protocol}.db")
            results.append(await run_era(protocol, args.rounds, args.warmup, path))
    store_text = "SQLite :memory:" if args.store == "memory" else "SQLite file in a temp dir (WAL, synchronous=NORMAL)"
    print(f"elicitation round trip: {args.rounds} rounds per side after {args.warmup} warm-up rounds; "
          f"store: {store_text}")
    print(f"{'mode':<8} {'era (bridge/bare)':<24} {'bridge med':>10} {'p90':>8} {'bare med':>9} {'p90':>8} "
          f"{'ratio med':>9} {'ratio p90':>9}  (ms)")
    failed = False
    for r in results:
        era = r.bridge_era if r.bridge_era == r.bare_era else f"{r.bridge_era}/{r.bare_era}"
        print(f"{r.protocol:<8} {era:<24} {ms(median(r.bridge)):>10} {ms(p90(r.bridge)):>8} "
              f"{ms(median(r.bare)):>9} {ms(p90(r.bare)):>8} {median(r.bridge) / median(r.bare):>8.2f}x "
              f"{p90(r.bridge) / p90(r.bare):>8.2f}x")
        if r.failures or r.refused:
            failed = True
            print(f"  ! {r.failures} round(s) did not return the answer, {r.refused} decision(s) not claimed",
                  file=sys.stderr)
    return 1 if failed else 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.elicitation_roundtrip", description=__doc__.split("\n")[0])
    parser.add_argument("--protocol", choices=["legacy", "auto", "both"], default="both",
                        help="protocol setting of both the bridge's session and the bare client (default: both)")
    parser.add_argument("--rounds", type=int, default=300, help="timed rounds per side (default 300)")
    parser.add_argument("--warmup", type=int, default=30, help="untimed rounds first (default 30)")
    parser.add_argument("--store", choices=["memory", "file"], default="memory",
                        help="the bridge's store: SQLite ':memory:' or a file in a temp dir (default memory)")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.warmup < 0:
        parser.error("--rounds must be at least 1 and --warmup at least 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    code: int = anyio.run(main_async, args, backend="asyncio")
    return code


if __name__ == "__main__":
    sys.exit(main())
