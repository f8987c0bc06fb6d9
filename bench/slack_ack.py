"""The Slack adapter under a team's load: ack latency at 200 clicks/s over Socket Mode, Web API calls per click, and
the App Home's cost per card, for the current adapter beside a baseline in the same run.

Two processes, as in production where Slack is elsewhere: this one runs the bridge (`Host` + the real
`SlackAdapter` in Socket Mode, the real bolt app and slack_sdk clients); a child process runs the fake Slack
(`tests/harness/slack`: Web API and Socket Mode) and plays the team. Acks are timed where Slack times them, in the fake:
from sending the envelope to the ack arriving on the websocket.

**ack**: the bridge keeps `--cards` (200) cards open for one on-call approver (half tool approvals, half one-field
forms; a card decided is replaced by a new one). The team sends `--rate` (200) clicks a second for `--seconds` (10),
open loop (a click is sent on time whether or not earlier ones were acked), in this mix: 20 % strangers (not in
`allowed_users`: refused by the allow-list), 30 % decisions (Approve/Deny or Decline on an open card), 15 %
duplicates (a click on a card already decided: a late click, told privately), 20 % modal submissions (a form's answer,
claimed in the ack) and 15 % "Fill in…" clicks (`views.open`). Prints ack p50/p90/p99/max per kind and overall, Web
API calls per click by method (calls the fake received from the first click until one second after the last ack),
the bridge's CPU per click, and the fake's own event-loop lag (if it lags, the figures say more about the fake).

**home**: N cards (10, 100, 200), each naming two approvers, posted at once and then all declined; counts the
`chat.getPermalink` calls and `views.publish` calls it caused (issue 10's figures: 200 / 20 000 / 59 092 permalink
calls before).

**baseline**: the same scenarios with the adapter as it was before these changes, reproduced by patches in this
file: no shared HTTP session (slack_sdk's session per call) and the App Home republished on every card event for
every approver named, with one `chat.getPermalink` per waiting card, one after another.

Run: `python -m bench.slack_ack [--help]`; figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import logging
import multiprocessing
import os
import random
import statistics
import tempfile
import time
from collections import Counter, deque
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any
from unittest import mock

import anyio

from adapters.slack import adapter as slack_adapter
from adapters.slack import create, ids, render, translate
from adapters.slack.client import SlackClients, api_errors
from adapters.slack.home import HomeTab
from bridge.door.forms import Form, form_from_schema
from bridge.door.model import Actor, CardRef, ConversationKey, DecisionIn, Detail, Interaction, Kind, ServerLabel
from bridge.errors import AdapterError
from bridge.host import Host
from bridge.storage import open_store
from tests.harness.hosts import config_for
from tests.harness.slack import FakeSlack, block_actions, view_submission

JSON = dict[str, Any]
APPROVER, SECOND, STRANGER = "U1", "U2", "U9"
MIX = (("stranger", 20), ("decision", 30), ("duplicate", 15), ("submit", 20), ("fill_in", 15))
FORM = {"type": "object", "properties": {"name": {"type": "string", "title": "Name"}}, "required": ["name"]}


# -- the Slack side (child process) ------------------------------------------------------------------------------


@dataclass
class Team:
    """What the team can see of the cards: open ones by id, and the latest decided ones."""

    open: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    """Interaction id → (channel, ts, "form" | "tool")."""
    by_message: dict[tuple[str, str], str] = field(default_factory=dict)
    """(channel, ts) → interaction id, of the open cards."""
    targeted: set[str] = field(default_factory=set)
    """Open cards a decision or submission was sent for: not picked again until they end."""
    decided: deque[tuple[str, str, str]] = field(default_factory=lambda: deque(maxlen=200))
    views: dict[str, str] = field(default_factory=dict)
    """Interaction id → the id of a modal opened on it."""
    opened: anyio.Event = field(default_factory=anyio.Event)
    want_open: int = 0


class TeamSlack(FakeSlack):
    """The fake Slack, also keeping track of which cards are open (for the team to click on)."""

    def __init__(self) -> None:
        super().__init__()
        self.team = Team()

    def _chat_post_message(self, args: JSON) -> JSON:
        answer = super()._chat_post_message(args)
        card = _card_of(args.get("blocks") or [])
        if card is not None:
            iid, kind = card
            self.team.open[iid] = (answer["channel"], answer["ts"], kind)
            self.team.by_message[(answer["channel"], answer["ts"])] = iid
            if len(self.team.open) >= self.team.want_open > 0:
                self.team.opened.set()
        return answer

    def _chat_update(self, args: JSON) -> JSON:
        answer = super()._chat_update(args)
        blocks = args.get("blocks") or []
        where = (str(args["channel"]), str(args["ts"]))
        if where in self.team.by_message and not any(b.get("type") == "actions" for b in blocks):
            iid = self.team.by_message.pop(where)
            del self.team.open[iid]
            self.team.targeted.discard(iid)
            self.team.decided.append((iid, *where))
        return answer

    def _views_open(self, args: JSON) -> JSON:
        answer = super()._views_open(args)
        meta = ids.ModalMeta.load(str(answer["view"].get("private_metadata", "")))
        if meta is not None:
            self.team.views[meta.interaction_id] = answer["view"]["id"]
        return answer


def _card_of(blocks: list[JSON]) -> tuple[str, str] | None:
    for block in blocks:
        if block.get("type") == "actions" and str(block.get("block_id", "")).endswith(".act"):
            actions = [e["action_id"] for e in block["elements"]]
            return block["elements"][0]["value"], ("form" if "mcp.open_form" in actions else "tool")
    return None


def slack_process(conn: Connection) -> None:
    """The child: a fake Slack that plays the team on command (`load`, `counts`, `stop`)."""
    logging.basicConfig(level=logging.WARNING)
    anyio.run(_slack_main, conn)


async def _slack_main(conn: Connection) -> None:
    fake = TeamSlack()
    async with fake:
        fake.users.update({APPROVER: "Ada Lovelace", SECOND: "Charles Babbage", STRANGER: "Eve"})
        conn.send(fake.api_url)
        while True:
            command, params = await anyio.to_thread.run_sync(conn.recv, abandon_on_cancel=True)
            if command == "stop":
                return
            if command == "counts":
                conn.send(dict(Counter(c.method for c in fake.calls)))
                fake.calls.clear()
            elif command == "load":
                conn.send(await _load(fake, **params))


async def _load(fake: TeamSlack, cards: int, rate: float, seconds: float, seed: int) -> JSON:
    team = fake.team
    team.want_open = cards
    if len(team.open) < cards:
        await team.opened.wait()
    rng = random.Random(seed)
    kinds = [k for k, _ in MIX]
    weights = [w for _, w in MIX]
    latencies: dict[str, list[float]] = {k: [] for k in kinds}
    lag: list[float] = []
    first_call = len(fake.calls)

    def pick(kind: str | None = None, free: bool = True) -> tuple[str, tuple[str, str, str]] | None:
        choices = [(i, c) for i, c in team.open.items() if (kind is None or c[2] == kind)
                   and (not free or i not in team.targeted)]
        return rng.choice(choices) if choices else None

    def click(user: str, iid: str, channel: str, ts: str, action: str) -> JSON:
        return block_actions(user, channel, ts, action, iid, block_id=f"{iid}.act", response_url=fake.response_url)

    def next_click(kind: str) -> tuple[str, JSON] | None:
        if kind == "stranger":
            card = pick(free=False)
            return None if card is None else ("stranger", click(STRANGER, card[0], card[1][0], card[1][1],
                                                                ids.ACCEPT))
        if kind == "duplicate" and team.decided:
            iid, channel, ts = rng.choice(team.decided)
            return "duplicate", click(APPROVER, iid, channel, ts, ids.ACCEPT)
        if kind == "submit":
            card = pick("form")
            if card is not None:
                iid, (channel, ts, _) = card
                team.targeted.add(iid)
                meta = ids.ModalMeta(iid, channel, ts).dump()
                values = {ids.field_block(0): {ids.FIELD_ACTION: {"type": "plain_text_input", "value": "Ada"}}}
                view_id = team.views.get(iid, f"VBENCH{iid}")
                return "submit", view_submission(APPROVER, view_id, ids.FORM_CALLBACK, meta, values)
        if kind == "fill_in":
            card = pick("form")
            if card is not None:
                iid, (channel, ts, _) = card
                return "fill_in", click(APPROVER, iid, channel, ts, ids.OPEN_FORM)
        card = pick()
        if card is None:
            return None
        iid, (channel, ts, card_kind) = card
        team.targeted.add(iid)
        action = rng.choice((ids.ACCEPT, ids.DECLINE)) if card_kind == "tool" else ids.DECLINE
        return "decision", click(APPROVER, iid, channel, ts, action)

    async def send(kind: str, payload: JSON) -> None:
        start = time.perf_counter()
        await fake.send_envelope("interactive", payload)
        latencies[kind].append(time.perf_counter() - start)

    async def watch_fake_lag(stop: anyio.Event) -> None:
        while not stop.is_set():
            before = time.perf_counter()
            await anyio.sleep(0.01)
            lag.append(time.perf_counter() - before - 0.01)

    total = int(rate * seconds)
    skipped = 0
    stop = anyio.Event()
    start = time.perf_counter()
    async with anyio.create_task_group() as outer:
        outer.start_soon(watch_fake_lag, stop)
        async with anyio.create_task_group() as tg:
            for i in range(total):
                due = start + i / rate
                delay = due - time.perf_counter()
                if delay > 0:
                    await anyio.sleep(delay)
                chosen = next_click(rng.choices(kinds, weights)[0])
                if chosen is None:
                    skipped += 1
                    continue
                tg.start_soon(send, *chosen)
        sent_for = time.perf_counter() - start
        await anyio.sleep(1.0)  # what the clicks set off after their acks (decisions, notices, Home tabs)
        stop.set()
    calls = Counter(c.method for c in fake.calls[first_call:])
    return {"latencies": latencies, "calls": dict(calls), "skipped": skipped, "sent_for": sent_for,
            "lag": lag, "open_at_end": len(team.open)}


# -- the bridge side (this process) ------------------------------------------------------------------------------


def quiet() -> None:
    for name in ("mcp", "bridge", "adapters", "slack_bolt", "slack_sdk", "aiohttp"):
        logging.getLogger(name).setLevel(logging.ERROR)


@contextlib.contextmanager
def baseline_patches() -> Iterator[None]:
    """The adapter as it was before: no shared HTTP session; the App Home republished on every card event for every
    approver named, with one `chat.getPermalink` per waiting card, one after another."""

    class EveryTimeHome(HomeTab):
        def request(self, user_id: str) -> None:
            self._background.spawn(f"App Home of {user_id}", functools.partial(self.publish, user_id))

        async def publish(self, user_id: str) -> None:
            items: list[tuple[Interaction, str | None]] = []
            for found in await self._inbound.cards(waiting_for=translate.actor(user_id)):
                interaction, card = found.interaction, found.card
                link = None
                if card is not None and "channel" in card.data:
                    try:
                        async with api_errors("chat.getPermalink"):
                            answer = await self._clients.bot.chat_getPermalink(channel=card.data["channel"],
                                                                               message_ts=card.data["ts"])
                        link = str(answer["permalink"])
                    except AdapterError:
                        pass
                items.append((interaction, link))
            try:
                async with api_errors("views.publish"):
                    await self._clients.bot.views_publish(user_id=user_id, view=render.home(items))
            except AdapterError:
                pass

    @asynccontextmanager
    async def no_shared_session(self: SlackClients) -> AsyncIterator[None]:
        yield

    with mock.patch.object(slack_adapter, "HomeTab", EveryTimeHome), \
            mock.patch.object(SlackClients, "shared_session", no_shared_session):
        yield


@asynccontextmanager
async def bridge(api_url: str, store_kind: str, tmp: Path) -> AsyncIterator[tuple[Host, slack_adapter.SlackAdapter]]:
    config = config_for({}, conversation_scope="thread")
    store = await open_store(tmp / f"bench-{time.monotonic_ns()}.db" if store_kind == "file" else ":memory:")
    host = Host(config, store)
    settings = {"bot_token": "xoxb-bench", "app_token": "xapp-bench", "api_url": api_url,
                "allowed_users": [APPROVER, SECOND]}
    adapter = create(host, settings, config)
    host.attach(adapter)
    try:
        async with host, anyio.create_task_group() as tg:
            tg.start_soon(adapter.serve)
            with anyio.fail_after(30):
                await adapter.ready.wait()
            yield host, adapter
            tg.cancel_scope.cancel()
    finally:
        await store.aclose()


def card(n: int, kind: str, approvers: frozenset[str]) -> Interaction:
    ada = Actor("slack", APPROVER, "Ada Lovelace")
    room = ConversationKey("slack", "T111", f"C{n % 4 + 1}", "1700000000.000001")
    common: JSON = {"id": f"b{n:07d}", "server": ServerLabel("bench", "Bench Server"), "conversation": room,
                    "requester": ada, "approvers": approvers, "expires_at": time.time() + 3600}
    if kind == "form":
        return Interaction(kind=Kind.FORM, message="Who books the table?", form=form_from_schema(FORM), **common)
    return Interaction(kind=Kind.TOOL, message="delete_repo is marked destructive.", form=Form(), tool="delete_repo",
                       details=(Detail("Arguments", '{"repo": "ada/engine"}'),), accept_label="Approve",
                       decline_label="Deny", quick_accept=True, **common)


async def watch_lag(lag: list[float]) -> None:
    """How late a 10 ms sleep wakes up: time the event loop spent on something else."""
    while True:
        before = time.perf_counter()
        await anyio.sleep(0.01)
        lag.append(time.perf_counter() - before - 0.01)


async def run_ack(conn: Connection, api_url: str, args: argparse.Namespace, tmp: Path, seed: int) -> JSON:
    counter = iter(range(10**7))
    async with bridge(api_url, args.store, tmp) as (host, _), anyio.create_task_group() as tg:
        async def keep_one_open(slot: int) -> None:
            kind = "form" if slot % 2 else "tool"
            while True:
                await host.broker.ask(card(next(counter), kind, frozenset({f"slack:{APPROVER}"})))

        for slot in range(args.cards):
            tg.start_soon(keep_one_open, slot)
        lag: list[float] = []
        load = os.getloadavg()[0]
        cpu = time.process_time()
        conn.send(("load", {"cards": args.cards, "rate": args.rate, "seconds": args.seconds, "seed": seed}))
        tg.start_soon(watch_lag, lag)
        result: JSON = await anyio.to_thread.run_sync(conn.recv)
        result |= {"cpu": time.process_time() - cpu, "bridge_lag": lag, "load": load}
        tg.cancel_scope.cancel()
    conn.send(("counts", {}))
    await anyio.to_thread.run_sync(conn.recv)
    return result


async def run_home(conn: Connection, api_url: str, n: int, args: argparse.Namespace, tmp: Path) -> JSON:
    ada = Actor("slack", APPROVER, "Ada Lovelace")
    approvers = frozenset({f"slack:{APPROVER}", f"slack:{SECOND}"})
    async with bridge(api_url, args.store, tmp) as (host, adapter):
        conn.send(("counts", {}))
        await anyio.to_thread.run_sync(conn.recv)
        posted = anyio.Event()
        count = [0]
        post_card = adapter.post_card

        async def counting(interaction: Interaction) -> CardRef:
            ref = await post_card(interaction)
            count[0] += 1
            if count[0] == n:
                posted.set()
            return ref

        adapter.post_card = counting  # type: ignore[method-assign]  # counts the cards the core has got back
        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            cards = [card(i, "tool", approvers) for i in range(n)]
            for c in cards:
                tg.start_soon(host.broker.ask, c)
            await posted.wait()
            for c in cards:
                await host.decide(DecisionIn(c.id, ada, "decline"))
        await adapter.background.idle()
        elapsed = time.perf_counter() - start
        conn.send(("counts", {}))
        counts: JSON = await anyio.to_thread.run_sync(conn.recv)
    return {"n": n, "permalinks": counts.get("chat.getPermalink", 0), "publishes": counts.get("views.publish", 0),
            "seconds": elapsed}


@contextlib.contextmanager
def slack_child() -> Iterator[tuple[Connection, str]]:
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=slack_process, args=(child,), daemon=True)
    process.start()
    try:
        yield parent, parent.recv()
    finally:
        with contextlib.suppress(OSError):
            parent.send(("stop", {}))
        process.join(10)
        if process.is_alive():
            process.terminate()


async def main(args: argparse.Namespace) -> None:
    quiet()
    variants = ["baseline", "current"] if args.variant == "both" else [args.variant]
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        if args.scenario in ("ack", "both"):
            print(f"ack: {args.cards} open cards, {args.rate:g} clicks/s for {args.seconds:g} s, store {args.store}")
            for variant in variants:
                gc.collect()  # the earlier variant's garbage is not this one's to collect
                with slack_child() as (conn, api_url), \
                        (baseline_patches() if variant == "baseline" else contextlib.nullcontext()):
                    result = await run_ack(conn, api_url, args, tmp, args.seed)
                print_ack(variant, result)
        if args.scenario in ("home", "both"):
            print("home: N cards naming two approvers, posted at once, then all declined")
            for variant in variants:
                for n in args.home_cards:
                    with slack_child() as (conn, api_url), \
                            (baseline_patches() if variant == "baseline" else contextlib.nullcontext()):
                        home = await run_home(conn, api_url, n, args, tmp)
                    print(f"  {variant:8} {n:4} cards: {home['permalinks']:6} chat.getPermalink, "
                          f"{home['publishes']:5} views.publish ({home['seconds']:.1f} s)")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))] if ordered else float("nan")


def print_ack(variant: str, result: JSON) -> None:
    everything = [x for values in result["latencies"].values() for x in values]
    clicks = len(everything)

    def line(name: str, values: list[float]) -> str:
        if not values:
            return f"    {name:10} (none)"
        return (f"    {name:10} n={len(values):5}  p50 {1000 * statistics.median(values):7.1f}  "
                f"p90 {1000 * percentile(values, 0.9):7.1f}  p99 {1000 * percentile(values, 0.99):7.1f}  "
                f"max {1000 * max(values):7.1f} ms")

    calls: dict[str, int] = result["calls"]
    per_click = sum(calls.values()) / clicks if clicks else 0.0
    print(f"  {variant}: {clicks} clicks acked in {result['sent_for']:.1f} s ({result['skipped']} skipped: no card "
          f"to click), {result['open_at_end']} cards open at the end")
    print(line("all", everything))
    for kind, values in result["latencies"].items():
        print(line(kind, values))
    top = ", ".join(f"{m} {n / clicks:.2f}" for m, n in sorted(calls.items(), key=lambda kv: -kv[1])[:8])
    print(f"    Web API calls per click {per_click:.2f} ({top})")
    print(f"    bridge CPU {1000 * result['cpu'] / max(clicks, 1):.2f} ms per click; event-loop lag p99 / max: bridge "
          f"{1000 * percentile(result['bridge_lag'], 0.99):.0f} / {1000 * max(result['bridge_lag'], default=0):.0f} "
          f"ms, fake Slack {1000 * percentile(result['lag'], 0.99):.0f} / {1000 * max(result['lag'], default=0):.0f} "
          f"ms; load average {result['load']:.1f} on {os.cpu_count()} CPUs")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--scenario", choices=("ack", "home", "both"), default="both")
    parser.add_argument("--variant", choices=("baseline", "current", "both"), default="both")
    parser.add_argument("--cards", type=int, default=200, help="open cards during the ack scenario")
    parser.add_argument("--rate", type=float, default=200.0, help="clicks per second")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--store", choices=("memory", "file"), default="file")
    parser.add_argument("--home-cards", type=lambda s: [int(x) for x in s.split(",")], default=[10, 100, 200])
    parser.add_argument("--seed", type=int, default=7)
    return parser.parse_args(argv)


if __name__ == "__main__":
    anyio.run(main, parse())
