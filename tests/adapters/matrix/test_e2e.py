"""End to end: the bridge in a real Synapse, a second nio client acting as the person.

Each test registers fresh users on the session's Synapse, lets the person invite the bot, and drives a card through
polls, threaded replies and reactions the way Element would send them.
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from nio import AsyncClient, LogoutResponse, RoomInviteResponse

from adapters.matrix.render import ACCEPT, CANCEL, DECLINE, POLL_END, POLL_START
from bridge.config.file import Config, ServerConfig
from bridge.door.forms import Field, FieldKind, Form, Option, approval_form
from bridge.door.model import Actor, ConversationKey, Detail, Interaction, Kind, Outcome, ServerLabel, Status
from bridge.errors import PlatformAPIError
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

pytestmark = pytest.mark.anyio


async def polls_by_field(p: Person, interaction: str) -> dict[str, str]:
    return {mark(e)["field"]: e.event_id for e in p.seen
            if mark(e).get("part") == "poll" and mark(e).get("interaction") == interaction}


@pytest.mark.parametrize(("key", "action"), [(DECLINE, "decline"), (CANCEL, "cancel")])
async def test_decline_and_cancel_by_reaction(synapse: Synapse, tmp_path: Path, key: str, action: str) -> None:
    config = Config(servers={"everything": everything()}, store=str(tmp_path / "bridge.db"))
    async with ada_with_the_bot(synapse, tmp_path, config) as (ada, _, _):
        await ada.say("!mcp call everything trigger-elicitation-request")
        root = await ada.wait(part("card"))
        await ada.wait(part("list"))  # the card's last part
        await ada.react(root.event_id, key)
        result = await ada.wait(lambda i, e: "Raw result:" in body(e))
        assert raw_result(body(result)) == {"action": action}
        edited = await ada.wait(edit_of(root.event_id))
        done = {"decline": "declined by", "cancel": "cancelled by"}[action]
        assert done in content(edited)["m.new_content"]["body"].lower()


async def test_expiry_edits_the_card(synapse: Synapse, tmp_path: Path) -> None:
    bot = register(synapse, "bot")
    server = ServerConfig(name="everything", command="node", args=everything().args, elicitation_timeout=3.0)
    config = Config(servers={"everything": server}, store=str(tmp_path / "bridge.db"))
    async with person(synapse, "ada", None) as ada, \
            bridge(config, matrix_block(synapse, bot, tmp_path / "bot"), tmp_path / "bridge.db"):
        await open_room(ada, bot.user_id, encrypted=False)
        await ada.say("!mcp call everything trigger-elicitation-request")
        root = await ada.wait(part("card"))
        edited = await ada.wait(edit_of(root.event_id))
        assert "expired" in content(edited)["m.new_content"]["body"].lower()
        await ada.wait(lambda i, e: getattr(e, "type", "") == POLL_END)
        result = await ada.wait(lambda i, e: "Raw result:" in body(e))
        assert raw_result(body(result)) == {"action": "cancel"}


async def test_a_strangers_vote_and_reaction_do_not_count(synapse: Synapse, tmp_path: Path) -> None:
    bot = register(synapse, "bot")
    config = Config(servers={"orders": ServerConfig(name="orders", inprocess=servers.orders(), protocol="legacy")},
                    store=str(tmp_path / "bridge.db"))
    async with person(synapse, "ada", None) as ada, person(synapse, "eve", None) as eve, \
            bridge(config, matrix_block(synapse, bot, tmp_path / "bot"), tmp_path / "bridge.db"):
        room = await ada.create_room([bot.user_id, eve.user_id], encrypted=False)
        await ada.wait_joined(bot.user_id)
        await eve.join(room)
        command = await ada.say("!mcp call orders order")
        root = await ada.wait(part("card"))
        poll = await ada.wait(part("poll", "colour"))

        await eve.vote(poll.event_id, ["3"])  # blue
        notice = await eve.wait(lambda i, e: "can answer this request" in body(e))
        assert content(notice)["m.mentions"] == {"user_ids": [eve.user_id]}

        await ada.say("table by the window", thread=command, latest=root.event_id)
        await ada.wait(lambda i, e: getattr(e, "sender", "") == bot.user_id and getattr(e, "key", "") == ACCEPT)
        await eve.react(root.event_id, ACCEPT)
        await eve.say("!cancel", thread=command)
        await ada.react(root.event_id, ACCEPT)
        result = await ada.wait(lambda i, e: "orders.order:" in body(e))
        assert "accepted: {'colour': 'red', 'note': 'table by the window'}" in body(result)


async def test_restart_in_the_middle_of_a_2026_request(synapse: Synapse, tmp_path: Path) -> None:
    username = f"bot-{uuid.uuid4().hex[:8]}"
    bot_id = synapse.register(username, "bot-password").user_id
    server = servers.bookings()  # the same object both times: its request-state key survives the restart
    config = Config(servers={"bookings": ServerConfig(name="bookings", inprocess=server)},
                    store=str(tmp_path / "bridge.db"))
    # A password login: the first run logs in once and keeps the device; the second run restores it.
    block = matrix_block(synapse, (bot_id, "bot-password"), tmp_path / "bot")
    async with person(synapse, "ada", None) as ada:
        async with bridge(config, block, tmp_path / "bridge.db") as first:
            await open_room(ada, bot_id, encrypted=False)
            command = await ada.say("!mcp call bookings book")
            root = await ada.wait(part("card"))
            poll = await ada.wait(part("poll", "cuisine"))
            await ada.vote(poll.event_id, ["3"])
            await ada.react(root.event_id, "👍")  # outdoor: yes, on the card
            await ada.say("Ada\n4", thread=command, latest=root.event_id)
            await ada.wait(edit_of(root.event_id))  # the typed answers were taken
            device = first.adapter.device_id

        async with bridge(config, block, tmp_path / "bridge.db") as second:
            assert second.adapter.device_id == device  # no second login, no new device
            restored = await ada.wait(part("restored"))
            await ada.say("Ada\n4\n-", thread=command, latest=restored.event_id)
            await ada.wait(lambda i, e: getattr(e, "sender", "") == bot_id and getattr(e, "key", "") == ACCEPT)
            await ada.react(root.event_id, ACCEPT)
            result = await ada.wait(lambda i, e: body(e).startswith("bookings.book:"))
            assert ("[2026-07-28] accepted: {'name': 'Ada', 'cuisine': 'mexican', 'outdoor': True, 'guests': 4, "
                    "'budget': 50.0}") in body(result)


def approval(kind: Kind, conversation: ConversationKey, actor: Actor, **extra: object) -> Interaction:
    fields: dict[str, object] = {
        "id": uuid.uuid4().hex[:8], "kind": kind, "server": ServerLabel("files", "File tools"),
        "conversation": conversation, "requester": actor, "approvers": frozenset({actor.key}),
        "message": "Please check this first.", "form": Form(), "expires_at": time.time() + 60,
        "accept_label": "Approve", "decline_label": "Deny", "quick_accept": True, **extra}
    return Interaction(**fields)  # type: ignore[arg-type]


async def test_tool_and_sampling_approval_by_reaction(synapse: Synapse, tmp_path: Path) -> None:
    config = Config(store=str(tmp_path / "bridge.db"), conversation_scope="channel")
    async with ada_with_the_bot(synapse, tmp_path, config) as (ada, running, _):
        await ada.say("!mcp help")  # a round trip, so the bot's own sync has seen it join the room
        await ada.wait(lambda i, e: body(e).startswith("Commands"))
        conversation = ConversationKey("matrix", "localhost", ada.room_id)
        actor = Actor("matrix", ada.user_id, "Ada")
        tool = approval(Kind.TOOL, conversation, actor, tool="delete_tree",
                        details=(Detail("Arguments", '{"path": "/tmp/x"} @room'),))
        prompt = Field("prompt", FieldKind.TEXT, "Prompt", default="What is 2+2?", has_default=True)
        sampling = approval(Kind.SAMPLING, conversation, actor, form=approval_form([prompt]))
        outcomes: dict[str, Outcome] = {}

        async def ask(interaction: Interaction) -> None:
            outcomes[interaction.id] = await running.host.broker.ask(interaction)

        def card_of(interaction: Interaction, name: str = "card") -> Callable[[int, Any], bool]:
            return lambda i, e: mark(e).get("interaction") == interaction.id and mark(e).get("part") == name

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, tool)
            root = await ada.wait(card_of(tool))
            assert "@room" not in body(root) and "delete_tree" in body(root)
            await ada.react(root.event_id, ACCEPT)
        assert outcomes[tool.id].status is Status.ACCEPTED
        by = outcomes[tool.id].by
        assert by is not None and by.user_id == ada.user_id

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, sampling)
            root = await ada.wait(card_of(sampling))
            await ada.say("edit", thread=root.event_id)
            question = await ada.wait(card_of(sampling, "question"))
            await ada.say("What is 3+3?", thread=root.event_id, latest=question.event_id)
            summary = await ada.wait(card_of(sampling, "summary"))
            await ada.react(summary.event_id, ACCEPT)
        assert outcomes[sampling.id].status is Status.ACCEPTED
        assert outcomes[sampling.id].content == {"prompt": "What is 3+3?"}


async def test_e2ee_required_refuses_unencrypted_rooms(synapse: Synapse, tmp_path: Path) -> None:
    bot = register(synapse, "bot")
    config = Config(store=str(tmp_path / "bridge.db"))
    block = matrix_block(synapse, bot, tmp_path / "bot", e2ee="required")
    async with person(synapse, "ada", None) as ada, bridge(config, block, tmp_path / "bridge.db"):
        await open_room(ada, bot.user_id, encrypted=False)
        await ada.say("!mcp help")
        refusal = await ada.wait(lambda i, e: "only work in encrypted rooms" in body(e))
        assert not any(body(e).startswith("Commands") for e in ada.seen)
        assert content(refusal)["msgtype"] == "m.notice"


# -- fixes from review -------------------------------------------------------------------------------------------


def in_thread(root: str) -> Callable[[int, Any], bool]:
    """The bot's answer in the thread of `root` (thread scope: a command's thread is its conversation)."""
    return lambda i, e: (content(e).get("m.relates_to") or {}).get("event_id") == root


def part_of(interaction: Interaction, name: str = "card") -> Callable[[int, Any], bool]:
    return lambda i, e: mark(e).get("interaction") == interaction.id and mark(e).get("part") == name


async def round_trip(p: Person) -> None:
    """A command answered: the bot's sync has seen everything before it (and the room, which it needs to send)."""
    await p.say("!mcp help")
    after = len(p.seen)
    await p.wait(lambda i, e: i >= after and body(e).startswith("Commands"))


async def test_commands_from_before_the_bot_joined_are_not_run(synapse: Synapse, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    bot = register(synapse, "bot")
    config = Config(store=str(tmp_path / "bridge.db"))
    async with person(synapse, "ada", None) as ada, \
            bridge(config, matrix_block(synapse, bot, tmp_path / "bot"), tmp_path / "bridge.db") as running:
        handled = record_messages(running, monkeypatch)
        await ada.create_room([], encrypted=False)
        await ada.say("!mcp help")  # history: said before the bot was even invited
        assert isinstance(await ada.client.room_invite(ada.room_id, bot.user_id), RoomInviteResponse)
        await ada.wait_joined(bot.user_id)
        new = await ada.say("!mcp help")
        await ada.wait(in_thread(new))
        assert [m.conversation.thread for m in handled] == [new]


async def test_events_being_handled_at_a_stop_are_handled_after_the_restart(synapse: Synapse, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    bot = register(synapse, "bot")  # a fixed device: the sync token is kept per device
    config = Config(store=str(tmp_path / "bridge.db"))
    block = matrix_block(synapse, bot, tmp_path / "bot")
    async with person(synapse, "ada", None) as ada:
        async with bridge(config, block, tmp_path / "bridge.db") as first:
            await open_room(ada, bot.user_id, encrypted=False)
            await round_trip(ada)
            reached = anyio.Event()
            handle = first.adapter.intake.handle

            async def stuck(event: Any) -> None:
                if body(event) == "!mcp pending":
                    reached.set()
                    await anyio.Event().wait()  # the bridge stops while this event is being handled
                await handle(event)

            monkeypatch.setattr(first.adapter.intake, "handle", stuck)
            command = await ada.say("!mcp pending")
            with anyio.fail_after(patient(WAIT)):
                await reached.wait()
        async with bridge(config, block, tmp_path / "bridge.db"):
            await ada.wait(in_thread(command))  # the sync after the restart brought it again


async def test_a_card_that_fails_half_way_is_ended_and_forgotten(synapse: Synapse, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    config = Config(store=str(tmp_path / "bridge.db"), conversation_scope="channel")
    async with ada_with_the_bot(synapse, tmp_path, config) as (ada, running, _):
        await round_trip(ada)
        conversation = ConversationKey("matrix", "localhost", ada.room_id)
        actor = Actor("matrix", ada.user_id, "Ada")
        colours = (Option("r", "Red"), Option("b", "Blue"))
        form = Form(fields=(Field("colour", FieldKind.CHOICE, "Colour", options=colours),
                            Field("note", FieldKind.TEXT, "Note")))
        card = approval(Kind.FORM, conversation, actor, form=form, quick_accept=False)
        post = running.adapter.outbox.post

        async def no_polls(room_id: str, data: Mapping[str, Any], *, event_type: str = "m.room.message",
                           plain_ok: bool = False) -> str:
            if event_type == POLL_START:
                raise PlatformAPIError("matrix", "room_send", "M_FORBIDDEN polls are not allowed here")
            return await post(room_id, data, event_type=event_type, plain_ok=plain_ok)

        monkeypatch.setattr(running.adapter.outbox, "post", no_polls)
        outcome = await running.host.broker.ask(card)
        assert outcome.status is Status.FAILED
        root = await ada.wait(part_of(card))
        edited = await ada.wait(edit_of(root.event_id))
        assert "failed" in content(edited)["m.new_content"]["body"].lower()
        assert "Waiting for" not in content(edited)["m.new_content"]["body"]
        index = running.adapter.cards
        assert card.id not in index._by_id and card.id not in index._by_event.values()
        assert all(card.id not in ids for ids in index._by_thread.values())


async def test_only_allowed_people_decide_cards_without_approvers(synapse: Synapse, tmp_path: Path) -> None:
    bot = register(synapse, "bot")
    config = Config(store=str(tmp_path / "bridge.db"), conversation_scope="channel")
    async with person(synapse, "ada", None) as ada, person(synapse, "eve", None) as eve:
        block = matrix_block(synapse, bot, tmp_path / "bot", allowed=[ada.user_id])
        async with bridge(config, block, tmp_path / "bridge.db") as running:
            room = await ada.create_room([bot.user_id, eve.user_id], encrypted=False)
            await ada.wait_joined(bot.user_id)
            await eve.join(room)
            await round_trip(ada)
            conversation = ConversationKey("matrix", "localhost", room)
            anyone = approval(Kind.TOOL, conversation, Actor("matrix", ada.user_id, "Ada"), tool="delete_tree",
                              requester=None, approvers=frozenset())
            outcomes: list[Outcome] = []

            async def ask() -> None:
                outcomes.append(await running.host.broker.ask(anyone))

            async with anyio.create_task_group() as tg:
                tg.start_soon(ask)
                root = await eve.wait(part_of(anyone))
                await eve.react(root.event_id, ACCEPT)
                notice = await eve.wait(lambda i, e: "your answer was not counted" in body(e))
                assert content(notice)["m.mentions"] == {"user_ids": [eve.user_id]}
                await eve.say("accept", thread=root.event_id)  # handled before Ada's reaction: it must not count
                await ada.react(root.event_id, ACCEPT)
            assert outcomes[0].status is Status.ACCEPTED
            assert outcomes[0].by is not None and outcomes[0].by.user_id == ada.user_id


async def test_rooms_outside_allowed_rooms_are_ignored(synapse: Synapse, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    bot = register(synapse, "bot")
    config = Config(store=str(tmp_path / "bridge.db"))
    async with person(synapse, "ada", None) as ada, \
            bridge(config, matrix_block(synapse, bot, tmp_path / "bot"), tmp_path / "bridge.db") as running:
        old_room = await ada.create_room([bot.user_id], encrypted=False)
        await ada.wait_joined(bot.user_id)
        await round_trip(ada)
        new_room = await ada.create_room([bot.user_id], encrypted=False)
        with anyio.fail_after(patient(WAIT)):
            while bot.user_id not in getattr(ada.client.rooms.get(new_room), "users", {}):
                await ada.client.sync(timeout=5_000)
        # The bot stays in the old room, but the config now allows only the new one.
        running.adapter.settings = dataclasses.replace(running.adapter.settings, allowed_rooms=(new_room,))
        handled = record_messages(running, monkeypatch)
        ada.room_id = old_room
        await ada.say("!mcp help")
        ada.room_id = new_room
        command = await ada.say("!mcp help")
        await ada.wait(in_thread(command))
        assert [m.conversation.channel for m in handled] == [new_room]


async def test_decline_by_replying_to_a_poll(synapse: Synapse, tmp_path: Path) -> None:
    config = Config(servers={"orders": ServerConfig(name="orders", inprocess=servers.orders(), protocol="legacy")},
                    store=str(tmp_path / "bridge.db"))
    async with ada_with_the_bot(synapse, tmp_path, config) as (ada, _, _):
        await ada.say("!mcp call orders order")
        poll = await ada.wait(part("poll", "colour"))
        await ada.say("!decline", reply_to=poll.event_id)
        result = await ada.wait(lambda i, e: "orders.order:" in body(e))
        assert "declined" in body(result)
        assert not any("not one of the options" in body(e) for e in ada.seen)


async def test_a_revoked_login_is_renewed_with_the_password(synapse: Synapse, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    username = f"bot-{uuid.uuid4().hex[:8]}"
    bot_id = synapse.register(username, "bot-password").user_id
    config = Config(store=str(tmp_path / "bridge.db"))
    block = matrix_block(synapse, (bot_id, "bot-password"), tmp_path / "bot")
    async with person(synapse, "ada", None) as ada, bridge(config, block, tmp_path / "bridge.db") as running:
        adapter = running.adapter
        await open_room(ada, bot_id, encrypted=False)
        await round_trip(ada)
        old_device = adapter.device_id
        renewed = anyio.Event()
        log_in_again = adapter.intake._log_in_again

        async def signal(exc: Any) -> None:
            await log_in_again(exc)
            renewed.set()

        monkeypatch.setattr(adapter.intake, "_log_in_again", signal)
        other = AsyncClient(synapse.base_url, bot_id)
        try:
            other.restore_login(bot_id, old_device, adapter.client.access_token)
            assert isinstance(await other.logout(), LogoutResponse)  # the device and its token are gone
        finally:
            await other.close()
        await ada.say("wakes the bot's sync; its next one is refused")
        with anyio.fail_after(patient(WAIT)):
            await renewed.wait()
        assert adapter.device_id != old_device
        kept = json.loads((tmp_path / "bot" / "credentials.json").read_text("utf-8"))
        assert kept["device_id"] == adapter.device_id
        await round_trip(ada)
