"""Events and notifications per form card on Matrix: server-everything's 13-field form answered as Element would.

A real Synapse (`tests/harness/synapse.py`), the bridge (host, Matrix adapter, server-everything over stdio)
and a person: a second matrix-nio client that sends what Element sends. One answer per poll tap (a changed mind is a
second tap), reactions on the card and on lists (a pick taken back is a redaction of the reaction, Element's second
tap), and typed answers as replies in the card's thread. Each card is driven to its end, then counted:

- **bot events** for the card: everything the bot sent that belongs to it (its messages and polls, edits of them,
  poll ends, its reactions, and messages replying to them), nothing else (the tool's status line and result);
- **notifications** it caused, as Synapse's default push rules decided them: the person's `GET /notifications`,
  each entry for one of those events, split into highlights and ones that sound.

The baseline is the same person against the Matrix adapter of another commit (default: the commit this branch
started from): its tree is exported with `git archive` and the same scenario runs in a child process with that tree
on `PYTHONPATH`, against the same Synapse. The person there answers that adapter's cards the way Element would: one
poll per choice (a multi-select poll still gets one answer per tap), one typed question at a time, ✅ on the summary.

    .venv/bin/python -m bench.matrix_form_events                   # 3 cards, baseline from the branch point
    .venv/bin/python -m bench.matrix_form_events --runs 5 --baseline main
    .venv/bin/python -m bench.matrix_form_events --no-baseline --e2ee

Figures are counts, not timings: they do not move between runs unless the flow changes.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tarfile
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import aiohttp
import anyio
from nio import (
    AsyncClient,
    AsyncClientConfig,
    Event,
    KeysQueryResponse,
    KeysUploadResponse,
    MatrixRoom,
    ReactionEvent,
    RoomCreateResponse,
    RoomMemberEvent,
    RoomRedactResponse,
    RoomSendResponse,
)

ROOT = Path(__file__).resolve().parents[1]
EVERYTHING = ROOT / "tests/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
BRANCH_POINT = "9866140"
"""main when this bench was written: the adapter with a poll per choice and one typed question at a time."""
MARK = "io.github.mcp_chat_bridge"
POLL_START, POLL_RESPONSE, POLL_END = ("org.matrix.msc3381.poll.start", "org.matrix.msc3381.poll.response",
                                       "org.matrix.msc3381.poll.end")
WAIT = 60.0
TYPED = {"name": "Ada Lovelace", "firstLine": "-", "email": "ada@example.com", "homepage": "https://example.com/ada",
         "birthdate": "1815-12-10", "integer": "7", "number": "2.5"}


@dataclass
class CardFigures:
    events: int
    posted: int
    edits: int
    poll_ends: int
    reactions: int
    notifications: int
    highlights: int
    sounding: int
    content: dict[str, Any]


# -- the person ---------------------------------------------------------------------------------------------------


class Person:
    """A person in Element, reduced to what Element sends, seeing everything in the room."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.room_id = ""
        self.seen: list[Any] = []
        client.add_event_callback(self._record, (Event,))

    async def _record(self, room: MatrixRoom, event: Any) -> None:
        self.seen.append(event)

    async def wait(self, check: Callable[[int, Any], bool]) -> Any:
        with anyio.fail_after(WAIT):
            while True:
                for i, event in enumerate(self.seen):
                    if check(i, event):
                        return event
                await self.client.sync(timeout=5_000)

    async def send(self, event_type: str, content: dict[str, Any]) -> str:
        if self.client.olm is not None and self.client.should_query_keys:
            assert isinstance(await self.client.keys_query(), KeysQueryResponse)
        response = await self.client.room_send(self.room_id, event_type, content, ignore_unverified_devices=True)
        assert isinstance(response, RoomSendResponse), response
        return str(response.event_id)

    async def say(self, text: str, *, thread: str | None = None, latest: str | None = None) -> str:
        content: dict[str, Any] = {"msgtype": "m.text", "body": text}
        if thread:  # Element's thread composer: m.thread with the reply fallback to the thread's latest event
            content["m.relates_to"] = {"rel_type": "m.thread", "event_id": thread, "is_falling_back": True,
                                       "m.in_reply_to": {"event_id": latest or thread}}
        return await self.send("m.room.message", content)

    async def tap_poll(self, poll_id: str, answer_id: str) -> None:
        """MPollBody.selectOption: one answer per tap."""
        await self.send(POLL_RESPONSE, {"m.relates_to": {"rel_type": "m.reference", "event_id": poll_id},
                                        POLL_RESPONSE: {"answers": [answer_id]}})

    async def react(self, event_id: str, key: str) -> str:
        return await self.send("m.reaction", {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id,
                                                               "key": key}})

    async def unreact(self, reaction_id: str) -> None:
        response = await self.client.room_redact(self.room_id, reaction_id)
        assert isinstance(response, RoomRedactResponse), response

    async def notifications(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        headers = {"Authorization": f"Bearer {self.client.access_token}"}
        async with aiohttp.ClientSession(headers=headers) as http:
            params: dict[str, str] = {"limit": "100"}
            while True:
                async with http.get(f"{self.client.homeserver}/_matrix/client/v3/notifications", params=params,
                                    raise_for_status=True) as response:
                    data = await response.json()
                out.extend(data.get("notifications", []))
                if not data.get("next_token"):
                    return out
                params["from"] = str(data["next_token"])


def content_of(event: Any) -> dict[str, Any]:
    source = getattr(event, "source", None) or {}
    c = source.get("content") if isinstance(source, dict) else None
    return c if isinstance(c, dict) else {}


def mark_of(event: Any) -> dict[str, Any]:
    m = content_of(event).get(MARK)
    return m if isinstance(m, dict) else {}


def part(name: str, *, field: str | None = None, after: int = 0) -> Callable[[int, Any], bool]:
    return lambda i, e: i >= after and mark_of(e).get("part") == name and \
        (field is None or mark_of(e).get("field") == field)


# -- answering, as Element would ----------------------------------------------------------------------------------


async def answer_card(p: Person, command: str, bot_id: str, after: int) -> str:
    """This branch's card: polls, reactions, one reply with a line per typed question, ✅."""
    root = await p.wait(part("card", after=after))
    card_id = str(mark_of(root)["interaction"])
    last = await p.wait(lambda i, e: mark_of(e).get("interaction") == card_id and mark_of(e).get("part") == "list")
    polls = {mark_of(e)["field"]: e.event_id for e in p.seen
             if mark_of(e).get("interaction") == card_id and mark_of(e).get("part") == "poll"}
    lists = {mark_of(e)["field"]: e.event_id for e in p.seen
             if mark_of(e).get("interaction") == card_id and mark_of(e).get("part") == "list"}
    await p.tap_poll(polls["untitledSingleSelectEnum"], "2")
    await p.tap_poll(polls["titledSingleSelectEnum"], "1")
    await p.tap_poll(polls["titledSingleSelectEnum"], "3")  # a changed mind: another tap
    await p.tap_poll(polls["legacyTitledEnum"], "4")
    await p.react(root.event_id, "👍")
    for key in ("2️⃣", "3️⃣"):
        await p.react(root.event_id, key)
    drums = await p.react(root.event_id, "4️⃣")
    await p.unreact(drums)  # the second tap on a pill
    for key in ("2️⃣", "3️⃣"):
        await p.react(lists["titledMultipleSelectEnum"], key)
    await p.say("\n".join(TYPED.values()), thread=command, latest=last.event_id)
    await p.wait(lambda i, e: isinstance(e, ReactionEvent) and e.sender == bot_id and e.reacts_to == root.event_id
                 and e.key == "✅")
    await p.react(root.event_id, "✅")
    return card_id


async def answer_baseline_card(p: Person, command: str, bot_id: str, after: int) -> str:
    """The branch point's card: a poll per choice in the thread, typed questions one at a time, ✅ on a summary."""
    root = await p.wait(part("card", after=after))
    card_id = str(mark_of(root)["interaction"])
    first = await p.wait(lambda i, e: mark_of(e).get("interaction") == card_id and mark_of(e).get("part") == "question")
    polls = {mark_of(e)["field"]: e.event_id for e in p.seen
             if mark_of(e).get("interaction") == card_id and mark_of(e).get("part") == "poll"}
    taps = {"check": ["yes"], "untitledSingleSelectEnum": ["2"], "untitledMultipleSelectEnum": ["2", "3"],
            "titledSingleSelectEnum": ["1", "3"], "titledMultipleSelectEnum": ["2", "3"], "legacyTitledEnum": ["4"]}
    for name, answers in taps.items():
        for answer in answers:  # Element: one answer per tap, also on a multi-select poll
            await p.tap_poll(polls[name], answer)
    question = first
    while True:
        text = TYPED[mark_of(question)["field"]]
        await p.say("skip" if text == "-" else text, thread=command, latest=question.event_id)
        question = await p.wait(next_question(card_id, p.seen.index(question) + 1))
        if mark_of(question)["part"] == "summary":
            break
    await p.react(question.event_id, "✅")
    return card_id


def next_question(card_id: str, after: int) -> Callable[[int, Any], bool]:
    return lambda i, e: i >= after and mark_of(e).get("interaction") == card_id and \
        mark_of(e).get("part") in ("question", "summary")


def result_after(after: int) -> Callable[[int, Any], bool]:
    return lambda i, e: i >= after and "Raw result:" in str(content_of(e).get("body", ""))


# -- counting -----------------------------------------------------------------------------------------------------


def card_events(p: Person, bot_id: str, card_id: str) -> list[Any]:
    """The bot's events for one card, in timeline order: marked with it, or relating or replying to one that is."""
    ids: set[str] = set()
    out = []
    for e in p.seen:
        if getattr(e, "sender", "") != bot_id:
            continue
        c = content_of(e)
        rel = c.get("m.relates_to") or {}
        reply = (rel.get("m.in_reply_to") or {}).get("event_id")
        if mark_of(e).get("interaction") == card_id or (rel.get("event_id") in ids and rel.get("rel_type") in (
                "m.replace", "m.reference", "m.annotation")) or reply in ids:
            ids.add(e.event_id)
            out.append(e)
    return out


def figures(p: Person, bot_id: str, card_id: str, notifications: list[dict[str, Any]],
            content: dict[str, Any]) -> CardFigures:
    events = card_events(p, bot_id, card_id)
    ids = {e.event_id for e in events}
    mine = [n for n in notifications if (n.get("event") or {}).get("event_id") in ids]

    def sounds(n: dict[str, Any]) -> bool:
        return any(isinstance(a, dict) and a.get("set_tweak") == "sound" for a in n.get("actions", []))

    def highlights(n: dict[str, Any]) -> bool:
        return any(isinstance(a, dict) and a.get("set_tweak") == "highlight" and a.get("value", True)
                   for a in n.get("actions", []))

    rel_types = [(content_of(e).get("m.relates_to") or {}).get("rel_type") for e in events]
    return CardFigures(
        events=len(events),
        posted=sum(1 for e, r in zip(events, rel_types, strict=True) if r in (None, "m.thread")
                   and getattr(e, "type", "") != "m.reaction"),
        edits=rel_types.count("m.replace"),
        poll_ends=sum(1 for e in events if getattr(e, "type", "") == POLL_END),
        reactions=sum(1 for e in events if isinstance(e, ReactionEvent)),
        notifications=len(mine), highlights=sum(1 for n in mine if highlights(n)),
        sounding=sum(1 for n in mine if sounds(n)), content=content)


# -- the scenario -------------------------------------------------------------------------------------------------


def register(base_url: str, name: str) -> tuple[str, str, str]:
    from tests.harness.synapse import Synapse

    server = Synapse()  # not started: only its registration call, against the running one
    try:
        server.base_url = base_url
        username = f"{name}-{uuid.uuid4().hex[:8]}"
        user = server.register(username, f"{username}-password")
    finally:
        server.stop()
    return user.user_id, user.access_token, user.device_id


@asynccontextmanager
async def person(base_url: str, store: Path | None) -> AsyncIterator[Person]:
    user_id, token, device = register(base_url, "ada")
    if store is not None:
        store.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 (set-up, before anything runs)
    client = AsyncClient(base_url, user_id, device_id=device, store_path=str(store or ""),
                         config=AsyncClientConfig(encryption_enabled=store is not None,
                                                  store_sync_tokens=store is not None, max_limit_exceeded=0,
                                                  max_timeouts=2))
    try:
        client.restore_login(user_id, device, token)
        if store is not None:
            assert isinstance(await client.keys_upload(), KeysUploadResponse)
        yield Person(client)
    finally:
        await client.close()


async def scenario(base_url: str, everything: Path, runs: int, *, baseline: bool, e2ee: bool) -> list[CardFigures]:
    from adapters.matrix import create
    from bridge.config.file import Config, ServerConfig
    from bridge.host import Host
    from bridge.storage import open_store

    for name in ("mcp", "bridge", "adapters", "nio"):
        logging.getLogger(name).setLevel(logging.ERROR)
    answer = answer_baseline_card if baseline else answer_card
    with tempfile.TemporaryDirectory(prefix="matrix-bench-") as tmp:
        work = Path(tmp)
        bot_id, token, device = register(base_url, "bot")
        server = ServerConfig(name="everything", command="node", args=(str(everything), "stdio"))
        config = Config(servers={"everything": server}, store=str(work / "bridge.db"))
        block = {"homeserver": base_url, "store_path": str(work / "bot"), "e2ee": "optional", "user_id": bot_id,
                 "access_token": token, "device_id": device}
        store = await open_store(work / "bridge.db")
        host = Host(config, store)
        adapter = create(host, block, config)
        host.attach(adapter)
        out: list[CardFigures] = []
        try:
            async with person(base_url, work / "ada" if e2ee else None) as ada, anyio.create_task_group() as tg:
                tg.start_soon(adapter.serve)
                with anyio.fail_after(WAIT):
                    await adapter.ready.wait()
                async with host:
                    state = [{"type": "m.room.encryption", "state_key": "",
                              "content": {"algorithm": "m.megolm.v1.aes-sha2"}}] if e2ee else []
                    created = await ada.client.room_create(name="bench", invite=[bot_id], initial_state=state)
                    assert isinstance(created, RoomCreateResponse), created
                    ada.room_id = str(created.room_id)
                    await ada.wait(lambda i, e: isinstance(e, RoomMemberEvent) and e.state_key == bot_id
                                   and e.membership == "join")
                    for _ in range(runs):
                        after = len(ada.seen)
                        command = await ada.say("!mcp call everything trigger-elicitation-request")
                        card_id = await answer(ada, command, bot_id, after)
                        result = await ada.wait(result_after(after))
                        raw = json.loads(str(content_of(result)["body"]).split("Raw result:", 1)[1])
                        await settle(ada, bot_id, card_id, baseline)
                        out.append(figures(ada, bot_id, card_id, await ada.notifications(), raw.get("content", {})))
                tg.cancel_scope.cancel()
        finally:
            await store.aclose()
        return out


async def settle(p: Person, bot_id: str, card_id: str, baseline: bool) -> None:
    """Wait for the card's last events (its polls ended, its lists closed), then one more sync."""
    polls = 6 if baseline else 3
    with anyio.fail_after(WAIT):
        while True:
            events = card_events(p, bot_id, card_id)
            ends = sum(1 for e in events if getattr(e, "type", "") == POLL_END)
            lists = [e.event_id for e in events if mark_of(e).get("part") == "list"]
            closed = [e for e in events if (content_of(e).get("m.relates_to") or {}).get("event_id") in lists and
                      (content_of(e).get("m.relates_to") or {}).get("rel_type") == "m.replace"]
            if ends >= polls and len(closed) >= len(lists):
                break
            await p.client.sync(timeout=2_000)
    await p.client.sync(timeout=500)


# -- running both -------------------------------------------------------------------------------------------------


def export_tree(ref: str, into: Path) -> str:
    """`git archive` of `ref` (the adapter and core to measure as the baseline); its full commit id."""
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", ref], check=True, capture_output=True,
                            text=True).stdout.strip()
    archive = into / "tree.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", "-o", str(archive), commit], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "tree", filter="data")
    return commit


def run_baseline(ref: str, base_url: str, runs: int, e2ee: bool) -> tuple[str, list[CardFigures]]:
    with tempfile.TemporaryDirectory(prefix="matrix-bench-baseline-") as tmp:
        commit = export_tree(ref, Path(tmp))
        tree = Path(tmp) / "tree"
        env = {**os.environ, "PYTHONPATH": str(tree)}
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--homeserver", base_url, "--runs",
               str(runs), "--everything", str(EVERYTHING)] + (["--e2ee"] if e2ee else [])
        done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"baseline run failed:\n{done.stdout}\n{done.stderr}")
        return commit, [CardFigures(**row) for row in json.loads(done.stdout.strip().splitlines()[-1])]


def table(label: str, rows: list[CardFigures]) -> None:
    print(f"\n{label}")
    print("  card  events (posted/edits/poll ends/reactions)  notifications (highlight/sound)")
    for n, r in enumerate(rows, 1):
        print(f"  {n:>4}  {r.events:>6} ({r.posted}/{r.edits}/{r.poll_ends}/{r.reactions}){'':<22}"
              f"{r.notifications:>3} ({r.highlights}/{r.sounding})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--runs", type=int, default=3, help="cards to fill in (default 3)")
    parser.add_argument("--baseline", default=BRANCH_POINT, help=f"commit to compare with (default {BRANCH_POINT})")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--e2ee", action="store_true", help="an encrypted room (the server then sees no msgtypes)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--homeserver", help=argparse.SUPPRESS)
    parser.add_argument("--everything", default=str(EVERYTHING), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        rows = anyio.run(lambda: scenario(args.homeserver, Path(args.everything), args.runs, baseline=True,
                                          e2ee=args.e2ee))
        print(json.dumps([asdict(r) for r in rows]))
        return 0
    from tests.harness.synapse import Synapse

    with Synapse() as synapse:
        rows = anyio.run(lambda: scenario(synapse.base_url, EVERYTHING, args.runs, baseline=False, e2ee=args.e2ee))
        expected = rows[0].content
        ok = all(r.content == expected for r in rows)
        room = "encrypted room" if args.e2ee else "unencrypted room, two members"
        print(f"server-everything's 13-field form, {args.runs} cards, {room}, Synapse's default push rules")
        table("this branch", rows)
        print(f"  content sent, identical in every run: {ok}")
        print(f"  {json.dumps(expected, sort_keys=True)}")
        if not args.no_baseline:
            commit, base = run_baseline(args.baseline, synapse.base_url, args.runs, args.e2ee)
            table(f"baseline {commit[:10]}", base)
            print(f"  content sent: {json.dumps(base[0].content, sort_keys=True)}")
            mean = sum(r.events for r in rows) / len(rows), sum(r.notifications for r in rows) / len(rows)
            bmean = sum(r.events for r in base) / len(base), sum(r.notifications for r in base) / len(base)
            print(f"\nper card: {mean[0]:g} events vs {bmean[0]:g}, {mean[1]:g} notifications vs {bmean[1]:g} "
                  "(target: at most 12 events and 2 notifications)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
