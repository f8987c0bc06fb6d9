"""N conversations, each with a 2026 form waiting for a person: what holding them costs, and answering them all.

For each of N conversations (a distinct `ConversationKey`, a different person) the bench runs a tool call the way the
`call` command does (`ToolCalls.run(..., park=True)`): the call is stored, its card posted, and it is parked, so the
run returns with nothing left waiting. It then reads the resident memory beside the baseline taken before the first
call (same process, after a warm-up call), counts the tasks and sessions still alive, answers every card as the
person whose call caused it (with an answer distinct per conversation), and checks that every server call got back
the answer given on its own card. Run: `python -m bench.pending_memory [--help]`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import anyio

from bench.common import (
    SERVER,
    TOOL,
    CountingPort,
    answer_for,
    answered,
    bench_limits,
    bench_server,
    quiet_logs,
    rss,
    tag_of,
)
from bridge.door.model import Actor, ConversationKey, DecisionIn, Interaction
from bridge.host import Host
from bridge.storage import open_store
from tests.harness.hosts import config_for, host_for

TARGETS = {10_000: 250 * 2**20, 100_000: 2**30}


def person(conversation: ConversationKey) -> Actor:
    """Each conversation's call is made by a different person (the one who must answer its card)."""
    return Actor("test", f"U-{conversation.channel}", f"Person {conversation.channel}")


async def start(host: Host, conversation: ConversationKey) -> None:
    """What `call bench book {...}` does: returns once the card is posted and the call parked."""
    result = await host.calls.run(conversation, person(conversation), SERVER, TOOL, {"tag": conversation.id()},
                                  park=True)
    if result is not None:
        raise RuntimeError(f"the call in {conversation.id()} finished without waiting: {result}")


async def decide(host: Host, card: Interaction) -> bool:
    tag = tag_of(card)
    actor = person(ConversationKey.from_id(tag))
    result = await host.decide(DecisionIn(card.id, actor, "accept", answer_for(tag)))
    return result.verdict.value == "claimed"


async def run(args: argparse.Namespace, n: int, store_path: str) -> int:
    config = config_for({SERVER: bench_server()}, server_protocol="auto", server_scope=args.scope,
                        max_sessions=args.max_sessions, limits=bench_limits(n + 1))  # + warm-up
    store = await open_store(store_path)
    level = "NORMAL, one synced commit per decision"  # `bridge.storage.sqlite`
    port = CountingPort(n)
    host, _ = await host_for(config, store, port)
    conversations = [ConversationKey("test", "W1", f"C{i:06d}", "T1") for i in range(n)]
    try:
        async with host:
            await host.resumed.wait()
            # Warm-up: one call answered in a conversation of its own, so first-use costs are not counted.
            warm = ConversationKey("test", "W0", "warm-up")
            await start(host, warm)
            await decide(host, await port.wait_open_card())
            await port.wait_results(1)
            port.reset()
            for session in host.pool.sessions():
                await host.pool.close(session)
            tasks_before, before = len(anyio.get_running_tasks()), rss()

            started = time.perf_counter()
            for conversation in conversations:
                await start(host, conversation)
            open_time = time.perf_counter() - started
            sessions = len(host.pool.sessions())
            for session in host.pool.sessions():
                await host.pool.close(session)  # idle ones: what the idle reaper does while people think
            after, tasks_after = rss(), len(anyio.get_running_tasks())
            parked = host.broker.statistics()["parked"]

            started = time.perf_counter()
            claimed = 0
            for card in list(port.cards.values()):
                claimed += await decide(host, card)
                if claimed - len(port.results) >= args.inflight:
                    await port.wait_results(claimed - args.inflight // 2)  # bounded, like people answering
            await port.wait_results(n)
            answer_time = time.perf_counter() - started
            good = sum(answered(port.results.get(c.id()), c.id()) for c in conversations)
    finally:
        await store.aclose()

    growth = after - before
    target = TARGETS.get(n)
    print(f"pending 2026 forms: {n} conversations, scope {args.scope}, max_sessions {args.max_sessions}, "
          f"store {'SQLite :memory:' if store_path == ':memory:' else 'SQLite file'} (synchronous={level})")
    print(f"  RSS baseline (same process, before the first call) {before / 2**20:.1f} MiB; with {n} pending "
          f"{after / 2**20:.1f} MiB: +{growth / 2**20:.1f} MiB, {growth / 2**10 / n:.2f} KiB per pending form"
          + (f" (target: +{target / 2**20:.0f} MiB)" if target else ""))
    print(f"  tasks alive: {tasks_before} before, {tasks_after} with all pending; parked: {parked}; "
          f"sessions open after opening all: {sessions} (idle, then closed)")
    print(f"  time to open all: {open_time:.2f} s ({open_time / n * 1e3:.2f} ms each); to answer all: "
          f"{answer_time:.2f} s ({answer_time / n * 1e3:.2f} ms each, at most {args.inflight} answered calls "
          "still running)")
    print(f"  server calls answered with their own card's answer: {good} of {n} ({claimed} decisions claimed)")
    ok = good == n and claimed == n and parked == n and tasks_after <= tasks_before
    if not ok:
        print("! some call was not parked, left a task behind, or did not get its own answer", file=sys.stderr)
    return 0 if ok else 1


async def main_async(args: argparse.Namespace) -> int:
    quiet_logs()
    code = 0
    for n in args.n:
        if args.store == "memory":
            code |= await run(args, n, ":memory:")
        else:
            with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
                code |= await run(args, n, str(Path(tmp) / "bridge.db"))
    return code


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.pending_memory", description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, nargs="+", default=[10_000],
                        help="pending forms, one run each (default 10000; the targets are for 10000 and 100000)")
    parser.add_argument("--scope", choices=["conversation", "shared"], default="conversation",
                        help="one MCP session per conversation (default) or one for all")
    parser.add_argument("--max-sessions", type=int, default=200, help="the pool's limit (default 200, the config's)")
    parser.add_argument("--store", choices=["memory", "file"], default="file",
                        help="the bridge's store: a SQLite file (default, as in production) or ':memory:' (whose "
                             "rows then count in RSS)")
    parser.add_argument("--inflight", type=int, default=1000,
                        help="answer ahead of results by at most this many calls (default 1000)")
    args = parser.parse_args(argv)
    if any(n < 1 for n in args.n):
        parser.error("--n must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    code: int = anyio.run(main_async, args, backend="asyncio")
    return code


if __name__ == "__main__":
    sys.exit(main())
