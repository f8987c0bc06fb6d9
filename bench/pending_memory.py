"""N conversations, each with a form waiting for a person: what it costs to hold them open, and to answer them all.

For each of N conversations (a distinct `ConversationKey`) the bench starts a tool call that elicits a small form,
waits (no sleeping) until the fake chat port has all N cards, reads the resident memory, then answers every card
and checks that each server call got back the answer given on its own card. With `scope: conversation` (the
default) every conversation has its own MCP session, which is what this measures; `--shared` compares one session
for all. Run: `python -m bench.pending_memory [--help]`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import anyio
from anyio.abc import TaskGroup

from bench.common import SERVER, TOOL, CountingPort, answer_for, answered, bench_server, quiet_logs, rss, tag_of
from bridge.host import Host
from bridge.model import Actor, ConversationKey, DecisionIn, Interaction
from bridge.storage import open_store
from bridge.testing import config_for, host_for


def person(conversation: ConversationKey) -> Actor:
    """Each conversation's call is made by a different person (the one who must answer its card)."""
    return Actor("test", f"U-{conversation.channel}", f"Person {conversation.channel}")


class Tally:
    """Counts finished calls and sets `all_done` when the expected number have come back."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.finished = 0
        self.answered = 0
        self.all_done = anyio.Event()

    async def call(self, host: Host, conversation: ConversationKey) -> None:
        tag = conversation.id()
        result = await host.calls.run(conversation, person(conversation), SERVER, TOOL, {"tag": tag})
        self.finished += 1
        if answered(result, tag):
            self.answered += 1
        if self.finished == self.expected:
            self.all_done.set()


async def decide(host: Host, card: Interaction) -> bool:
    """Accept as the person whose call caused the card (not `card.requester`: see the note on misrouted cards)."""
    tag = tag_of(card)
    actor = person(ConversationKey.from_id(tag))
    result = await host.decide(DecisionIn(card.id, actor, "accept", answer_for(tag)))
    return result.verdict.value == "claimed"


async def warm_up(host: Host, port: CountingPort, tg: TaskGroup) -> None:
    """One answered call in a conversation of its own, so imports and caches filled on first use are not counted
    as the cost of the pending conversations."""
    tally = Tally(1)
    tg.start_soon(tally.call, host, ConversationKey("test", "W0", "warm-up"))
    await decide(host, await port.wait_open_card())
    await tally.all_done.wait()
    port.reset()


async def run(args: argparse.Namespace, store_path: str) -> int:
    n: int = args.n
    scope = "shared" if args.shared else "conversation"
    config = config_for({SERVER: bench_server()}, server_protocol=args.protocol, server_scope=scope,
                        max_sessions=n + 10)
    store = await open_store(store_path)
    port = CountingPort(n)
    host, _ = await host_for(config, store, port)
    conversations = [ConversationKey("test", "W1", f"C{i:05d}", "T1") for i in range(n)]
    tally = Tally(n)
    code = 0
    try:
        await host.__aenter__()
        try:
            async with anyio.create_task_group() as tg:
                await warm_up(host, port, tg)
                before = rss()
                started = time.perf_counter()
                for conversation in conversations:
                    tg.start_soon(tally.call, host, conversation)
                with anyio.move_on_after(args.timeout):
                    await port.all_open.wait()
                open_time = time.perf_counter() - started
                if not port.all_open.is_set():
                    print(f"! only {port.opened} of {n} cards were posted within {args.timeout}s", file=sys.stderr)
                    tg.cancel_scope.cancel()
                    return 1
                after = rss()
                sessions = len(host.pool.sessions())
                open_in_broker = host.broker.statistics()["open"]
                cards = list(port.cards.values())
                misrouted = sum(1 for c in cards if c.conversation.id() != tag_of(c))
                approvers = sum(len(c.approvers) for c in cards)
                per_conversation = Counter(c.conversation.id() for c in cards)

                started = time.perf_counter()
                claimed = 0
                for card in cards:
                    claimed += await decide(host, card)
                decide_time = time.perf_counter() - started
                with anyio.move_on_after(args.timeout):
                    await tally.all_done.wait()
                answer_time = time.perf_counter() - started
                if not tally.all_done.is_set():
                    tg.cancel_scope.cancel()
        finally:
            closing = time.perf_counter()
            await host.aclose()
            close_time = time.perf_counter() - closing
    finally:
        await store.aclose()

    era = "2026-07-28" if args.protocol == "auto" else "2025-11-25"
    store_text = "SQLite :memory:" if store_path == ":memory:" else "SQLite file in a temp dir"
    print(f"pending forms: {n} conversations, scope {scope}, protocol {args.protocol} (expected era {era}), "
          f"store {store_text}")
    print(f"  sessions open: {sessions}; interactions open in the broker: {open_in_broker}; cards posted: {len(cards)}")
    print(f"  RSS before {before / 2**20:.1f} MiB, with all pending {after / 2**20:.1f} MiB: "
          f"{(after - before) / 2**10 / n:.1f} KiB per pending conversation")
    print(f"  time to open all {n}: {open_time:.3f} s ({open_time / n * 1000:.2f} ms each)")
    print(f"  time to answer all: {answer_time:.3f} s (decisions claimed in {decide_time:.3f} s, "
          f"{claimed} claimed)")
    print(f"  shutdown of the host: {close_time:.3f} s")
    print(f"  server calls answered with their own card's answer: {tally.answered} of {n} "
          f"({tally.finished} calls returned)")
    if misrouted:
        busiest, count = per_conversation.most_common(1)[0]
        print(f"  note: {misrouted} of {len(cards)} cards were posted in another conversation than their call's "
              f"(most in {busiest}: {count})")
    if approvers > len(cards):
        print(f"  note: the cards name {approvers} approvers in all ({approvers / len(cards):.1f} per card)")
    if tally.answered != n or claimed != n:
        print(f"! {n - tally.answered} call(s) missing their answer, {n - claimed} decision(s) not claimed",
              file=sys.stderr)
        code = 1
    return code


async def main_async(args: argparse.Namespace) -> int:
    quiet_logs()
    if args.store == "memory":
        return await run(args, ":memory:")
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        return await run(args, str(Path(tmp) / "bridge.db"))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.pending_memory", description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1000, help="conversations with a pending form (default 1000)")
    parser.add_argument("--shared", action="store_true",
                        help="one shared MCP session for all conversations instead of one per conversation")
    parser.add_argument("--protocol", choices=["legacy", "auto"], default="auto",
                        help="the server's protocol setting (default auto, which is 2026-07-28 in process)")
    parser.add_argument("--store", choices=["memory", "file"], default="memory",
                        help="the bridge's store: SQLite ':memory:' or a file in a temp dir (default memory)")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="give up (exit 1) if opening or answering takes longer than this many seconds")
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error("--n must be at least 1")
    if args.shared and args.protocol == "legacy":
        # The bridge runs calls one at a time on a shared legacy session (a 2025-11-25 server request does not say
        # which open call it is for), so N forms can never be pending at once there.
        parser.error("--shared with --protocol legacy holds one pending form at a time by design; nothing to measure")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    code: int = anyio.run(main_async, args, backend="asyncio")
    return code


if __name__ == "__main__":
    sys.exit(main())
