"""Bounds that keep a shared host alive, against real in-process MCP servers on both eras: over a bound the server
gets the protocol's error, the conversation one short notice, and nothing hangs."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

import anyio
import pytest
from mcp.server.mcpserver import MCPServer

from bridge.door.model import Actor, ConversationKey, DecisionIn, MessageIn
from bridge.host import Host
from bridge.safety.limits import Limits
from bridge.storage import open_store
from tests.harness.hosts import ALICE, BOB, ROOM, FakeChatPort, config_for, host_for, patient
from tests.servers.flood import flood_server
from tests.servers.inline import form_server

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

ERAS = ["legacy", "auto"]


@asynccontextmanager
async def bridge(server: MCPServer, protocol: str, **limits: Any) -> AsyncIterator[tuple[Host, FakeChatPort]]:
    config = config_for({"flood": server}, server_protocol=protocol, limits=replace(Limits(), **limits))
    host, chat = await host_for(config)
    async with host:
        yield host, chat


async def call(host: Host, tool: str, arguments: dict[str, Any] | None = None, *,
               where: ConversationKey = ROOM, who: Actor = ALICE) -> None:
    text = f"call flood {tool}" + (f" {json.dumps(arguments)}" if arguments else "")
    await host.handle_message(MessageIn(where, who, text, explicit_command=True))


async def cancel_all(host: Host, chat: FakeChatPort, who: Actor = ALICE) -> None:
    for card in list(chat.cards.values()):
        if card.id not in chat.finished:
            await host.decide(DecisionIn(card.id, who, "cancel"))


async def test_one_legacy_call_gets_at_most_its_bound_of_cards_and_errors_for_the_rest() -> None:
    async with bridge(flood_server(), "legacy", open_cards_per_call=5) as (host, chat):
        await call(host, "many", {"n": 40})
        with anyio.fail_after(patient(20)):
            # Every request has reached the bridge once the server has counted 35 refusals (shown as progress).
            await chat.wait_for(lambda: True if any(s.progress == 35 for v in chat.statuses.values() for s in v)
                                else None)
            assert len(chat.cards) == 5
            await cancel_all(host, chat)
            result = await chat.wait_message("flood.many:")
    assert json.loads(result.split("\n", 1)[1]) == {"cancel": 5, "error -32600": 35}
    # One notice, however many requests were refused.
    [notice] = [m.text for m in chat.messages if "at most 5 open requests" in m.text]
    assert "Answer or cancel what is waiting" in notice


async def test_one_2026_call_over_its_bound_is_not_continued_and_its_cards_end() -> None:
    async with bridge(flood_server(), "auto", open_cards_per_call=5) as (host, chat):
        await call(host, "many", {"n": 40})
        with anyio.fail_after(patient(20)):
            failure = await chat.wait_message("was not continued")
            await chat.wait_for(lambda: True if set(chat.finished) == set(chat.cards) else None)
    assert "Refused by the bridge: one call may have at most 5 open requests" in failure
    assert len(chat.cards) <= 5
    assert not host.broker.open_interactions()


@pytest.mark.parametrize("protocol", ERAS)
async def test_one_persons_waiting_calls_are_bounded_across_conversations(protocol: str) -> None:
    async with bridge(flood_server(), protocol, open_cards_per_person=3) as (host, chat):
        rooms = [replace(ROOM, thread=f"T{n}") for n in range(5)]
        for room in rooms:
            await call(host, "one", where=room)
        with anyio.fail_after(patient(20)):
            # Two refused calls: a notice and the call's end in each of their conversations.
            await chat.wait_for(lambda: True if len(chat.messages) == 2 + 2 and len(chat.cards) == 3 else None)
            await cancel_all(host, chat)
            await chat.wait_for(lambda: True if len([m for m in chat.messages if "flood.one" in m.text]) == 5
                                else None)
    refused = [m for m in chat.messages if "3 requests already wait for this person" in m.text]
    results = [m.text for m in chat.messages if m.text.startswith("flood.one")]
    assert len(refused) >= 2  # a notice (and, on 2026, the call's own failure) in each refused conversation
    assert sorted(r.split("\n", 1)[-1].split(":")[0] for r in results) == sorted(
        ["cancel"] * 3 + (["error -32600"] * 2 if protocol == "legacy" else ["flood.one was not continued"] * 2))


@pytest.mark.parametrize("protocol", ERAS)
async def test_one_conversation_is_bounded_whoever_asks(protocol: str) -> None:
    # Three servers, as a legacy session runs one call at a time: each call has a session of its own.
    servers = {name: flood_server(name) for name in ("flood", "flood2", "flood3")}
    config = config_for(servers, server_protocol=protocol, limits=Limits(open_cards_per_conversation=2))
    host, chat = await host_for(config)
    async with host:
        for server, who in (("flood", ALICE), ("flood2", ALICE), ("flood3", BOB)):
            await host.handle_message(MessageIn(ROOM, who, f"call {server} one", explicit_command=True))
            if server == "flood2":
                with anyio.fail_after(patient(20)):
                    await chat.wait_for(lambda: True if len(chat.cards) == 2 else None)
        with anyio.fail_after(patient(20)):
            notice = await chat.wait_message("this conversation already has 2 open requests")
            failure = await chat.wait_message("was not continued" if protocol == "auto" else "error -32600")
            await cancel_all(host, chat)
            await chat.wait_for(lambda: True if len([m for m in chat.messages if m.text.startswith("flood")
                                                     and ".one" in m.text.split(None, 1)[0]]) == 3 else None)
    assert "Refused by the bridge" in failure and "this conversation already has 2 open requests" in failure
    assert notice != failure
    assert len(chat.cards) == 2


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_server_asking_too_often_is_refused_at_once(protocol: str) -> None:
    async with bridge(flood_server(), protocol, server_requests_per_minute=3) as (host, chat):
        for n in range(3):
            await call(host, "one")
            with anyio.fail_after(patient(10)):
                card = await chat.wait_card(index=n)
                await host.decide(DecisionIn(card.id, ALICE, "decline"))
                await chat.wait_for(lambda n=n: True if len(  # type: ignore[misc]
                    [m for m in chat.messages if m.text.startswith("flood.one")]) == n + 1 else None)
        await call(host, "one")
        with anyio.fail_after(patient(10)):
            notice = await chat.wait_message("more than 3 times a minute")
            result = await chat.wait_for(lambda: next((m.text for m in chat.messages[3:]
                                                       if m.text.startswith("flood.one")), None))
    assert ("error -32600: Refused by the bridge" if protocol == "legacy" else "was not continued") in result
    assert "Refused by the bridge: more than 3 requests a minute" in result
    assert len(chat.cards) == 3
    assert notice.startswith("flood asked for people more than 3 times a minute")


@pytest.mark.parametrize("protocol", ERAS)
@pytest.mark.parametrize(("schema", "why"), [
    ({"type": "object", "properties": {f"f{i}": {"type": "boolean"} for i in range(60)}},
     "the form has 60 fields; this bridge shows at most 50"),
    ({"type": "object", "properties": {"pick": {"type": "string", "enum": [f"o{i}" for i in range(2000)]}}},
     "the field 'pick' has 2000 options; this bridge shows at most 1000"),
    ({"type": "object", "properties": {"x": {"type": "string", "description": "d" * 300_000}}},
     "the form's schema takes 293 KB; this bridge takes at most 256 KB"),
])
async def test_an_oversized_form_is_refused_with_invalid_params(protocol: str, schema: dict[str, Any],
                                                               why: str) -> None:
    host, chat = await host_for(config_for({"forms": form_server()}, server_protocol=protocol))
    async with host:
        text = f"call forms fill {json.dumps({'schema': json.dumps(schema)})}"
        await host.handle_message(MessageIn(ROOM, ALICE, text, explicit_command=True))
        with anyio.fail_after(patient(10)):
            notice = await chat.wait_message("cannot show")
            failure = await chat.wait_message("forms.fill")
    assert why in notice
    assert not chat.cards
    assert "Unsupported requestedSchema" in failure and why in failure


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_long_result_is_shortened_in_chat_and_shown_whole_on_request(protocol: str) -> None:
    async with bridge(flood_server(), protocol, tool_result_size=200_000) as (host, chat):
        await call(host, "big", {"size": 500_000})
        with anyio.fail_after(patient(20)):
            report = await chat.wait_message("flood.big:")
            assert len(report) < 4000
            result_id = report.rsplit("`show ", 1)[1].split("`", 1)[0]
            await host.handle_message(MessageIn(ROOM, ALICE, f"show {result_id}", explicit_command=True))
            whole = await chat.wait_message("more characters not kept")
            # Another conversation cannot see it.
            await host.handle_message(MessageIn(replace(ROOM, thread="other"), BOB, f"show {result_id}",
                                                explicit_command=True))
            refused = await chat.wait_message("Usage: show <id>")
    assert whole.startswith("00000000....")
    assert "00001999...." in whole and "00002000" not in whole.split("\n… [")[0]
    assert len(whole.split("\n… [")[0]) == 200_000
    assert "300000 more characters not kept" in whole
    assert refused


async def test_cards_taken_up_after_a_restart_count_against_the_bounds(store_target: str) -> None:
    config = config_for({"flood": flood_server()}, server_protocol="auto",
                        limits=replace(Limits(), open_cards_per_conversation=1))
    host, chat = await host_for(config, await open_store(store_target))
    async with host:
        await call(host, "one", who=ALICE)
        with anyio.fail_after(patient(20)):
            card = await chat.wait_card()
    await host.store.aclose()
    again, chat2 = await host_for(config, await open_store(store_target))
    async with again:
        with anyio.fail_after(patient(20)):
            await again.broker.wait_open(card.id)  # parked again, and counted
            await call(again, "one", who=BOB)
            failure = await chat2.wait_message("was not continued")
            await again.decide(DecisionIn(card.id, ALICE, "cancel"))  # once it ends, there is room again
            await chat2.wait_message("flood.one:")
            await call(again, "one", who=BOB)
            await chat2.wait_card()
    await again.store.aclose()
    assert "this conversation already has 1 open requests" in failure
