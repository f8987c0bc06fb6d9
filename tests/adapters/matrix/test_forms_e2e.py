"""Form cards end to end in a real Synapse, answered with exactly what Element sends.

Element's poll UI sends one answer per tap (`MPollBody.selectOption`: `PollResponseEvent.from([answerId], …)`), a
reaction pill toggles (a tap sends an `m.reaction` annotation, a second tap redacts it: `ReactionsRowButton`), and a
message typed in a thread carries `m.thread` with the reply fallback to the latest event there. The person here
sends those, through a second nio client.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from nio import ReactionEvent

from adapters.matrix.layout import NO, YES
from adapters.matrix.render import ACCEPT, POLL_END
from bridge.config.file import Config, ServerConfig
from bridge.door.forms import Field, FieldKind, Form, Option, form_from_schema
from bridge.door.model import Actor, ConversationKey, Interaction, Kind, Outcome, ServerLabel, Status
from tests.adapters.matrix import servers
from tests.adapters.matrix.harness import (
    WAIT,
    Person,
    ada_with_the_bot,
    body,
    bridge,
    content,
    edit_of,
    everything,
    mark,
    matrix_block,
    open_room,
    part,
    person,
    raw_result,
    record_messages,
    register,
)
from tests.harness.hosts import patient
from tests.harness.synapse import Synapse
from tests.servers.inline import form_server

pytestmark = pytest.mark.anyio

EVERYTHING_ANSWER = {
    "name": "Ada Lovelace", "check": True, "firstLine": "It was a dark and stormy night.",
    "email": "ada@example.com", "homepage": "https://example.com/ada", "birthdate": "1815-12-10",
    "integer": 7, "number": 2.5, "untitledSingleSelectEnum": "Rachel",
    "untitledMultipleSelectEnum": ["Piano", "Violin"], "titledSingleSelectEnum": "hero-3",
    "titledMultipleSelectEnum": ["fish-2", "fish-3"], "legacyTitledEnum": "pet-4"}


def fields_of(p: Person, interaction: str, name: str) -> dict[str, str]:
    return {mark(e)["field"]: e.event_id for e in p.seen
            if mark(e).get("part") == name and mark(e).get("interaction") == interaction}


def bot_reaction(bot_id: str, target: str, key: str) -> Callable[[int, Any], bool]:
    return lambda i, e: isinstance(e, ReactionEvent) and e.sender == bot_id and e.reacts_to == target \
        and e.key == key


def card_event_ids(p: Person, interaction: str) -> set[str]:
    return {e.event_id for e in p.seen if mark(e).get("interaction") == interaction}


def events_of_card(p: Person, bot_id: str, interaction: str) -> list[Any]:
    """Every event the bot sent for one card: its own events, and edits, poll ends and reactions of them."""
    ids = card_event_ids(p, interaction)
    out = []
    for e in p.seen:
        if getattr(e, "sender", "") != bot_id:
            continue
        rel = content(e).get("m.relates_to") or {}
        if e.event_id in ids or (rel.get("rel_type") in ("m.replace", "m.reference", "m.annotation")
                                 and rel.get("event_id") in ids):
            out.append(e)
    return out


async def answer_everything(ada: Person, command: str, bot_id: str) -> str:
    """Fill in server-everything's 13-field form the way a person in Element does; returns the card's id."""
    root = await ada.wait(part("card"))
    card_id = mark(root)["interaction"]
    lst = await ada.wait(part("list"))  # posted last
    polls = fields_of(ada, card_id, "poll")
    lists = fields_of(ada, card_id, "list")
    assert sorted(polls) == ["legacyTitledEnum", "titledSingleSelectEnum", "untitledSingleSelectEnum"]
    assert list(lists) == ["titledMultipleSelectEnum"]
    for e in ada.seen:
        if mark(e).get("part") == "poll":
            assert "m.relates_to" not in content(e)  # top level, where Element shows polls right
            assert content(e)["org.matrix.msc3381.poll.start"]["max_selections"] == 1

    # Polls: one answer per tap; a changed mind is another tap, and only the latest counts.
    await ada.vote(polls["untitledSingleSelectEnum"], ["2"])
    await ada.vote(polls["titledSingleSelectEnum"], ["1"])
    await ada.vote(polls["titledSingleSelectEnum"], ["3"])
    await ada.vote(polls["legacyTitledEnum"], ["4"])
    # On the card: yes to the terms, and instruments by toggling number reactions (Drums tapped twice: taken back).
    await ada.react(root.event_id, YES)
    await ada.react(root.event_id, "2️⃣")
    await ada.react(root.event_id, "3️⃣")
    drums = await ada.react(root.event_id, "4️⃣")
    await ada.unreact(drums)
    # The fish list: Salmon and Trout replace the default Tuna.
    await ada.react(lists["titledMultipleSelectEnum"], "2️⃣")
    await ada.react(lists["titledMultipleSelectEnum"], "3️⃣")
    # One reply, a line per typed question; the email does not fit and is asked again, alone.
    await ada.say("Ada Lovelace\n-\nnot-an-email\nhttps://example.com/ada\n1815-12-10\n7\n2.5",
                  thread=command, latest=lst.event_id)
    reask = await ada.wait(part("reask"))
    assert body(reask).count("\n") == 1 and "3. String with email format" in body(reask), body(reask)
    await ada.say("ada@example.com", thread=command, latest=reask.event_id)
    await ada.wait(bot_reaction(bot_id, root.event_id, ACCEPT))  # the form can be sent now: one tap
    await ada.react(root.event_id, ACCEPT)
    return str(card_id)


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "e2ee"])
async def test_everything_form_answered_as_element_sends_it(synapse: Synapse, tmp_path: Path,
                                                            encrypted: bool) -> None:
    config = Config(servers={"everything": everything()}, store=str(tmp_path / "bridge.db"))
    async with ada_with_the_bot(synapse, tmp_path, config, encrypted=encrypted) as (ada, _, bot_id):
        command = await ada.say("!mcp call everything trigger-elicitation-request")
        card_id = await answer_everything(ada, command, bot_id)

        result = await ada.wait(lambda i, e: "Raw result:" in body(e))
        assert raw_result(body(result)) == {"action": "accept", "content": EVERYTHING_ANSWER}
        root = next(e for e in ada.seen if mark(e).get("part") == "card")
        assert content(root)["m.mentions"] == {"user_ids": [ada.user_id]}
        assert content(root)["msgtype"] == "m.text"
        assert content(root)["m.relates_to"]["event_id"] == command  # the command's thread is the conversation
        edited = await ada.wait(lambda i, e: edit_of(root.event_id)(i, e) and
                                "accepted by" in content(e)["m.new_content"]["body"].lower())
        assert "Piano, Violin" in content(edited)["m.new_content"]["body"]
        ends = 0
        with anyio.fail_after(patient(WAIT)):
            while ends < 3:
                ends = sum(1 for e in ada.seen if getattr(e, "type", "") == POLL_END)
                if ends < 3:
                    await ada.client.sync(timeout=5_000)
        lst = next(e for e in ada.seen if mark(e).get("part") == "list")
        closed = await ada.wait(edit_of(lst.event_id))
        assert "Salmon, Trout" in content(closed)["m.new_content"]["body"]
        sent = events_of_card(ada, bot_id, card_id)
        # card, 3 polls, list, re-ask, progress edit, ✅, final edit, 3 poll ends, list edit
        assert len(sent) == 13, [(getattr(e, "type", ""), body(e)[:40]) for e in sent]
        others = [e for e in sent if e.event_id != root.event_id]
        assert all(content(e).get("msgtype", "m.notice") == "m.notice" or
                   (content(e).get("m.relates_to") or {}).get("rel_type") == "m.replace" for e in others)
        if not encrypted:  # in an encrypted room the homeserver cannot tell a notice from a message
            ids = {e.event_id for e in sent}
            pings = [n for n in await ada.notifications() if n["event"]["event_id"] in ids]
            assert [n["event"]["event_id"] for n in pings] == [root.event_id]  # the card, once


async def test_a_removed_reaction_removes_the_choice(synapse: Synapse, tmp_path: Path) -> None:
    config = Config(servers={"pets": ServerConfig(name="pets", inprocess=servers.pets(), protocol="legacy")},
                    store=str(tmp_path / "bridge.db"))
    async with ada_with_the_bot(synapse, tmp_path, config) as (ada, _, bot_id):
        await ada.say("!mcp call pets adopt")
        root = await ada.wait(part("card"))
        await ada.wait(bot_reaction(bot_id, root.event_id, ACCEPT))  # nothing required: ready at once
        cat = await ada.react(root.event_id, "1️⃣")
        await ada.react(root.event_id, "2️⃣")
        await ada.unreact(cat)  # a second tap on Cat's pill
        yes = await ada.react(root.event_id, YES)
        await ada.unreact(yes)  # an optional yes/no left empty again, with one tap
        await ada.react(root.event_id, ACCEPT)
        result = await ada.wait(lambda i, e: "pets.adopt:" in body(e))
        assert "accepted: {'pets': ['dog'], 'vaccinated': None}" in body(result)


async def test_a_yes_no_answered_on_the_card_and_changed(synapse: Synapse, tmp_path: Path) -> None:
    config = Config(servers={"pets": ServerConfig(name="pets", inprocess=servers.pets(), protocol="legacy")},
                    store=str(tmp_path / "bridge.db"))
    async with ada_with_the_bot(synapse, tmp_path, config) as (ada, _, _):
        await ada.say("!mcp call pets adopt")
        root = await ada.wait(part("card"))
        await ada.react(root.event_id, YES)
        await ada.react(root.event_id, NO)  # both shown; the latest counts
        await ada.react(root.event_id, "4️⃣")  # three pets only: told so, and nothing changes
        await ada.wait(lambda i, e: "has 3 options: react with 1️⃣-3️⃣" in body(e))
        await ada.react(root.event_id, ACCEPT)
        result = await ada.wait(lambda i, e: "pets.adopt:" in body(e))
        assert "accepted: {'pets': ['cat'], 'vaccinated': False}" in body(result)  # the default pet, untouched


async def expired_card(synapse: Synapse, tmp_path: Path) -> tuple[Config, dict[str, Any]]:
    bot = register(synapse, "bot")
    server = ServerConfig(name="everything", command="node", args=everything().args, elicitation_timeout=4.0)
    config = Config(servers={"everything": server}, store=str(tmp_path / "bridge.db"))
    return config, matrix_block(synapse, bot, tmp_path / "bot") | {"_bot": bot.user_id}


async def test_late_answers_get_one_notice_and_the_questions_show_the_end(synapse: Synapse, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    config, block = await expired_card(synapse, tmp_path)
    bot_id = block.pop("_bot")
    async with person(synapse, "ada", None) as ada, bridge(config, block, tmp_path / "bridge.db") as running:
        await open_room(ada, bot_id, encrypted=False)
        command = await ada.say("!mcp call everything trigger-elicitation-request")
        root = await ada.wait(part("card"))
        lst = await ada.wait(part("list"))
        card_id = mark(root)["interaction"]
        poll = fields_of(ada, card_id, "poll")["legacyTitledEnum"]
        edited = await ada.wait(edit_of(root.event_id))  # it expires unanswered
        assert "expired" in content(edited)["m.new_content"]["body"].lower()
        closed = await ada.wait(edit_of(lst.event_id))
        assert "has ended (expired)" in content(closed)["m.new_content"]["body"]
        await ada.wait(lambda i, e: getattr(e, "type", "") == POLL_END)
        result = await ada.wait(lambda i, e: "Raw result:" in body(e))
        handled = record_messages(running, monkeypatch)

        after = len(ada.seen)
        await ada.react(root.event_id, YES)
        notice = await ada.wait(lambda i, e: i >= after and "already ended (expired)" in body(e))
        assert content(notice)["msgtype"] == "m.notice"
        assert content(notice)["m.mentions"] == {"user_ids": [ada.user_id]}
        await ada.vote(poll, ["2"])  # told already: no second notice within the interval
        await ada.say("Ada\n-\nada@example.com\n-\n-\n-\n-", thread=command, latest=result.event_id)
        await ada.say("!mcp help", thread=command, latest=result.event_id)  # a round trip: all of it was handled
        await ada.wait(lambda i, e: i >= after and body(e).startswith("Commands"))
        assert sum(1 for e in ada.seen[after:] if "already ended" in body(e)) == 1
        assert [m.text for m in handled] == ["help"]  # the late answer did not go to the agent


async def test_a_late_reply_to_a_question_is_told_and_other_talk_goes_on(synapse: Synapse, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    config, block = await expired_card(synapse, tmp_path)
    bot_id = block.pop("_bot")
    async with person(synapse, "ada", None) as ada, bridge(config, block, tmp_path / "bridge.db") as running:
        await open_room(ada, bot_id, encrypted=False)
        command = await ada.say("!mcp call everything trigger-elicitation-request")
        root = await ada.wait(part("card"))
        await ada.wait(edit_of(root.event_id))
        result = await ada.wait(lambda i, e: "Raw result:" in body(e))
        handled = record_messages(running, monkeypatch)
        after = len(ada.seen)
        await ada.say("Ada Lovelace", reply_to=root.event_id)  # a reply to the card itself
        await ada.wait(lambda i, e: i >= after and "already ended (expired)" in body(e))
        await ada.say("thanks, what else can you do?", thread=command, latest=result.event_id)
        with anyio.fail_after(patient(WAIT)):
            while not handled:
                await ada.client.sync(timeout=1_000)
        assert [m.text for m in handled] == ["thanks, what else can you do?"]


def huge_interaction(conversation: ConversationKey, actor: Actor, **extra: Any) -> Interaction:
    fields: dict[str, Any] = {
        "id": uuid.uuid4().hex[:8], "kind": Kind.FORM, "server": ServerLabel("big", "Big"),
        "conversation": conversation, "requester": actor, "approvers": frozenset({actor.key}),
        "message": "x", "form": Form(), "expires_at": time.time() + 120, **extra}
    return Interaction(**fields)


async def test_huge_choices_render_and_every_event_fits(synapse: Synapse, tmp_path: Path) -> None:
    """30 000 options, a 72 KB question, a 92 KB link and titles that make a 500 KB poll end: every event the bot
    sends stays under the homeserver's 65 536 bytes, and the choice can still be answered."""
    config = Config(store=str(tmp_path / "bridge.db"), conversation_scope="channel")
    async with ada_with_the_bot(synapse, tmp_path, config) as (ada, running, bot_id):
        await ada.say("!mcp help")
        await ada.wait(lambda i, e: body(e).startswith("Commands"))
        conversation = ConversationKey("matrix", "localhost", ada.room_id)
        actor = Actor("matrix", ada.user_id, "Ada")
        many = tuple(Option(f"v{n}", f"Option <{n}> & \"more\"") for n in range(30_000))
        long_titles = tuple(Option(f"t{n}", "é<" * 12_000) for n in range(19))
        form = Form(fields=(
            Field("big", FieldKind.CHOICE, "Pick one of many " * 200, description="&" * 30_000, options=many,
                  required=True),
            Field("bigmulti", FieldKind.MULTI, "Pick several", options=many[:5_000]),
            Field("wide", FieldKind.CHOICE, "Wide", options=long_titles, default="t3", has_default=True),
            Field("note", FieldKind.TEXT, "<" * 40_000, description="\U0001f600" * 20_000)))
        card = huge_interaction(conversation, actor, message="<&>\"" * 18_000, form=form)
        outcomes: list[Outcome] = []

        async def ask(i: Interaction) -> None:
            outcomes.append(await running.host.broker.ask(i))

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, card)
            root = await ada.wait(lambda i, e: mark(e).get("interaction") == card.id and mark(e).get("part") == "card")
            assert "… and " in body(root) and "more (type the value or title)" in body(root)
            await ada.wait(lambda i, e: mark(e).get("interaction") == card.id and mark(e).get("part") == "poll")
            await ada.say("v29999\nv2, v4999\n-", thread=root.event_id)
            await ada.wait(bot_reaction(bot_id, root.event_id, ACCEPT))
            await ada.react(root.event_id, ACCEPT)
        assert outcomes[0].status is Status.ACCEPTED
        assert outcomes[0].content == {"big": "v29999", "bigmulti": ["v2", "v4999"], "wide": "t3"}

        url = "https://example.org/" + "a<&" * 31_000
        link = huge_interaction(conversation, actor, kind=Kind.URL, url=url, quick_accept=True,
                                message="Open " * 20_000)
        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, link)
            root = await ada.wait(lambda i, e: mark(e).get("interaction") == link.id and mark(e).get("part") == "card")
            await ada.react(root.event_id, ACCEPT)
        await ada.wait(edit_of(root.event_id))
        await ada.wait(lambda i, e: getattr(e, "type", "") == POLL_END)
        await ada.say("!mcp help")
        await ada.wait(lambda i, e: body(e).startswith("Commands") and i > len(ada.seen) - 3)
        sizes = [len(json.dumps(e.source, ensure_ascii=False).encode()) for e in ada.seen
                 if getattr(e, "sender", "") == bot_id]
        assert max(sizes) < 65_536, max(sizes)


async def test_no_control_bidi_or_invisible_characters_reach_the_room(synapse: Synapse, tmp_path: Path) -> None:
    config = Config(store=str(tmp_path / "bridge.db"), conversation_scope="channel")
    async with ada_with_the_bot(synapse, tmp_path, config) as (ada, running, bot_id):
        await ada.say("!mcp help")
        await ada.wait(lambda i, e: body(e).startswith("Commands"))
        conversation = ConversationKey("matrix", "localhost", ada.room_id)
        actor = Actor("matrix", ada.user_id, "Ada")
        hostile = "a\x1b[2Jb\u202ec\u200bd\ufeffe\u00adf\u061cg\u2060h\x07\x9bi"
        form = form_from_schema({"type": "object", "properties": {
            "pick": {"type": "string", "title": hostile, "enum": ["x" + hostile, "y"]},
            "text": {"type": "string", "title": hostile, "description": hostile}}})
        card = huge_interaction(conversation, actor, message=hostile, form=form)
        link = huge_interaction(conversation, actor, kind=Kind.URL, url="https://аpple.com/\u202elogin",
                                quick_accept=True, message=hostile)

        async def ask(i: Interaction) -> None:
            await running.host.broker.ask(i)

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, card)
            tg.start_soon(ask, link)
            root = await ada.wait(lambda i, e: mark(e).get("interaction") == card.id and mark(e).get("part") == "card")
            url_card = await ada.wait(lambda i, e: mark(e).get("interaction") == link.id)
            await ada.wait(lambda i, e: mark(e).get("interaction") == card.id and mark(e).get("part") == "poll")
            await ada.react(root.event_id, "❌")
            await ada.react(url_card.event_id, "❌")
        assert "xn--pple-43d.com" in body(url_card) and "[U+202E]" in body(url_card)
        await ada.wait(edit_of(root.event_id))
        bad = {chr(c) for c in (*range(0, 9), *range(11, 32), *range(0x7F, 0xA0))} | \
            set("\u202e\u200b\ufeff\u00ad\u061c\u2060\u202a\u2066")
        checked = 0
        for e in ada.seen:
            if getattr(e, "sender", "") == bot_id:
                for text in strings(content(e)):
                    assert not (set(text) & bad), text[:200]
                    checked += 1
        assert checked > 20


def strings(value: Any) -> list[str]:
    """Every string in an event's content, keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


async def test_a_vote_on_a_card_that_ended_with_the_last_run_is_told_how_it_ended(synapse: Synapse,
                                                                                   tmp_path: Path) -> None:
    bot = register(synapse, "bot")
    config = Config(servers={"orders": ServerConfig(name="orders", inprocess=servers.orders(), protocol="legacy")},
                    store=str(tmp_path / "bridge.db"))
    block = matrix_block(synapse, bot, tmp_path / "bot")
    async with person(synapse, "ada", None) as ada:
        async with bridge(config, block, tmp_path / "bridge.db"):
            await open_room(ada, bot.user_id, encrypted=False)
            await ada.say("!mcp call orders order")
            root = await ada.wait(part("card"))
            poll = await ada.wait(part("poll", "colour"))
        # A legacy request ends with the bridge (its server waited on a connection that is gone).
        await ada.wait(edit_of(root.event_id))
        async with bridge(config, block, tmp_path / "bridge.db"):
            after = len(ada.seen)
            await ada.vote(poll.event_id, ["2"])
            notice = await ada.wait(lambda i, e: i >= after and "That request was already" in body(e))
            assert content(notice)["msgtype"] == "m.notice"


async def test_a_date_default_the_field_refuses_is_suggested_and_a_skip_does_not_take_it(synapse: Synapse,
                                                                                         tmp_path: Path) -> None:
    """An ISO week date (`2026-W01-1`) as a server's default is only suggested: `-` leaves the field empty, so a
    required one is asked again instead of the card holding a value the form can never send."""
    schema = {"type": "object", "required": ["week"], "properties": {
        "week": {"type": "string", "format": "date", "title": "Week", "default": "2026-W01-1"},
        "at": {"type": "string", "format": "date-time", "title": "At", "default": "2026-W01-1T10:00:00Z"},
        "landing": {"type": "string", "format": "date-time", "title": "Landing", "default": "1969-07-20T20:17:40Z"}}}
    config = Config(servers={"forms": ServerConfig(name="forms", inprocess=form_server(), protocol="legacy")},
                    store=str(tmp_path / "bridge.db"))
    async with ada_with_the_bot(synapse, tmp_path, config) as (ada, _, bot_id):
        command = await ada.say(f"!mcp call forms fill {json.dumps({'schema': json.dumps(schema)})}")
        root = await ada.wait(part("card"))
        assert "Week: a date, YYYY-MM-DD, suggested: 2026-W01-1, required" in body(root), body(root)
        await ada.say("-\n-\n-", thread=command, latest=root.event_id)
        reask = await ada.wait(part("reask"))
        assert "This one is required" in body(reask), body(reask)
        await ada.say("2026-01-05", thread=command, latest=reask.event_id)
        await ada.wait(bot_reaction(bot_id, root.event_id, ACCEPT))
        await ada.react(root.event_id, ACCEPT)
        result = await ada.wait(lambda i, e: "forms.fill:" in body(e))
    sent = json.loads(body(result).split("forms.fill:", 1)[1].strip().strip("`").strip())
    assert sent["action"] == "accept"
    assert sent["content"] == {"week": "2026-01-05", "landing": "1969-07-20T20:17:40Z"}
