"""Where sessions go: a 2026-07-28 server's calls from every conversation share a small pool (grown by calls running at
once), a legacy server and `scope: conversation` keep a session per conversation, and each call's roots are its own
conversation's on a shared session."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import anyio
import pytest
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent

from bridge.config.file import ProtocolEra as Era
from bridge.config.file import RootsPolicy, ServerConfig
from bridge.door.model import Actor, ConversationKey, DecisionIn, MessageIn
from bridge.host import Host
from tests.bridge.test_connect import bridge as connected
from tests.bridge.test_connect import web
from tests.harness.hosts import ALICE, BOB, ROOM, config_for, host_for, patient
from tests.servers.features import features_server
from tests.servers.signin import ADA, CHANNEL, Site, open_card, sign_in
from tests.servers.signin import BOB as CONNECT_BOB

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]
__all__ = ["web"]  # the per-person accounts' fixture (tests.bridge.test_connect)
ROOT = Path(__file__).resolve().parents[2]
WHO = ServerConfig(name="who", command=sys.executable, args=("-m", "tests.servers.whoami"), cwd=str(ROOT))


def room(n: int) -> ConversationKey:
    return ConversationKey("test", "W1", "C1", f"T{n}")


def text(result: CallToolResult | None) -> str:
    assert result is not None and not result.is_error, result
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


async def pids_of(host: Host, conversations: list[ConversationKey]) -> list[str]:
    """Every conversation calls `who.pid` once, all at the same time."""
    pids: list[str] = []

    async def one(conversation: ConversationKey) -> None:
        pids.append(text(await host.calls.run(conversation, ALICE, "who", "pid", {})))

    with anyio.fail_after(patient(120)):
        async with anyio.create_task_group() as tg:
            for conversation in conversations:
                tg.start_soon(one, conversation)
    return pids


@pytest.mark.parametrize("protocol", ["auto", "2026-07-28"])
async def test_a_2026_stdio_server_used_by_50_conversations_runs_in_the_pools_processes_only(protocol: Era) -> None:
    host, _ = await host_for(config_for({"who": replace(WHO, protocol=protocol)}, pool_size=2))
    async with host:
        pids = await pids_of(host, [room(n) for n in range(50)])
        # Later uses stay in the pool too (the era is remembered, not probed again).
        pids += await pids_of(host, [room(n) for n in range(50, 60)])
        sessions = [(s.modern, s.slot, s.conversation) for s in host.pool.sessions()]
    assert sorted(sessions)[0] == (True, 0, None) and len(sessions) <= 2
    assert all(modern and slot is not None and conversation is None for modern, slot, conversation in sessions)
    assert len(pids) == 60 and 1 <= len(set(pids)) <= len(sessions)


async def test_a_legacy_server_and_scope_conversation_keep_a_session_per_conversation() -> None:
    config = config_for({"who": replace(WHO, protocol="legacy"),
                         "mine": replace(WHO, name="mine", scope="conversation")}, pool_size=2)
    host, _ = await host_for(config)
    conversations = [room(n) for n in range(4)]
    async with host:
        legacy = await pids_of(host, conversations)

        async def mine(conversation: ConversationKey) -> str:
            return text(await host.calls.run(conversation, ALICE, "mine", "pid", {}))

        with anyio.fail_after(patient(60)):
            own = [await mine(c) for c in conversations]
        sessions = [(s.key, s.modern) for s in host.pool.sessions()]
    assert len(set(legacy)) == 4 and len(set(own)) == 4
    assert sorted(sessions) == sorted([((c.id(), "mine", ""), True) for c in conversations]
                                      + [((c.id(), "who", ""), False) for c in conversations])


async def test_the_pool_grows_with_calls_running_at_once_up_to_its_size() -> None:
    server = MCPServer("slow")
    running = [anyio.Event() for _ in range(3)]
    release = anyio.Event()
    started = 0

    @server.tool()
    async def hold() -> str:
        nonlocal started
        started += 1
        running[started - 1].set()
        await release.wait()
        return "done"

    host, _ = await host_for(config_for({"slow": server}, pool_size=2))
    results: list[str] = []

    async def call(n: int) -> None:
        results.append(text(await host.calls.run(room(n), ALICE, "slow", "hold", {})))

    async with host:
        with anyio.fail_after(patient(30)):
            async with anyio.create_task_group() as tg:
                for n in range(3):  # one at a time: each is running on the server before the next is made
                    tg.start_soon(call, n)
                    await running[n].wait()
                    if n == 0:
                        one = [s.slot for s in host.pool.sessions()]
                grown = sorted((s.slot, len(s.calls)) for s in host.pool.sessions())
                release.set()
    assert one == [0]  # an idle pooled session was there for nobody: the first call started it
    assert grown == [(0, 2), (1, 1)]  # a second when the first was busy; the third shares, the size being 2
    assert results == ["done"] * 3


async def test_two_conversations_roots_each_reach_their_own_calls_on_a_shared_session() -> None:
    server, _ = features_server()
    config = config_for({"feat": server}, pool_size=1, server_roots=RootsPolicy(approval="ask"))
    host, chat = await host_for(config)
    other = replace(ROOM, thread="T2")
    here, there = "file:///srv/here", "file:///srv/there"
    async with host:
        with anyio.fail_after(patient(30)):
            for conversation, uri in ((ROOM, here), (other, there)):
                await host.handle_message(MessageIn(conversation, ALICE, f"roots add {uri}", explicit_command=True))
                await chat.wait_message(f"Added {uri}")
            await host.handle_message(MessageIn(ROOM, ALICE, "call feat my_roots", explicit_command=True))
            await host.handle_message(MessageIn(other, BOB, "call feat my_roots", explicit_command=True))
            first, second = await chat.wait_card("roots", 0), await chat.wait_card("roots", 1)
            cards = {c.conversation: c for c in (first, second)}
            sessions = [(s.slot, s.modern, len(s.calls)) for s in host.pool.sessions()]
            # Both calls are open on one session at once; the later one is decided first.
            await host.decide(DecisionIn(cards[other].id, BOB, "accept"))
            await chat.wait_for(lambda: next((m for m in chat.messages if m.conversation == other
                                              and m.text.startswith("feat.my_roots:")), None))
            await host.decide(DecisionIn(cards[ROOM].id, ALICE, "accept"))
            await chat.wait_for(lambda: next((m for m in chat.messages if m.conversation == ROOM
                                              and m.text.startswith("feat.my_roots:")), None))
    assert sessions == [(0, True, 2)]
    assert [d.text for d in cards[ROOM].details] == [here] and [d.text for d in cards[other].details] == [there]
    said = {m.conversation: m.text for m in chat.messages if m.text.startswith("feat.my_roots:")}
    assert said == {ROOM: f"feat.my_roots:\nroots: -={here}", other: f"feat.my_roots:\nroots: -={there}"}


async def test_per_person_accounts_never_share_a_session_on_a_2026_server(web: Site) -> None:
    elsewhere = ConversationKey("test", "W1", "C2")
    results: dict[str, CallToolResult | None] = {}
    async with connected(web) as (host, chat, _):
        async def call(person: Actor) -> None:
            results[person.user_id] = await host.calls.run(CHANNEL, person, "s", "whoami", {})

        with anyio.fail_after(patient(30)):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call, ADA)
                tg.start_soon(call, CONNECT_BOB)
                await sign_in((await open_card(chat, ADA)).url, "ada")
                await sign_in((await open_card(chat, CONNECT_BOB)).url, "bob")
            again = await host.calls.run(elsewhere, ADA, "s", "whoami", {})  # her token, another conversation
        sessions = sorted((s.key, s.modern, s.slot) for s in host.pool.sessions())
    assert text(results["U-ada"]).endswith("for ada") and text(results["U-bob"]).endswith("for bob")
    assert text(again).endswith("for ada")
    assert sessions == [((CHANNEL.id(), "s", ADA.key), True, None), ((CHANNEL.id(), "s", CONNECT_BOB.key), True, None),
                        ((elsewhere.id(), "s", ADA.key), True, None)]
