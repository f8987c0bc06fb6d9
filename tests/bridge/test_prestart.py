"""Stdio servers started ahead of need (`prestart: true`): adopted by their first session, with the environment the
SDK would give them; stopped with the bridge when nobody used them; never adopted once dead or reconfigured."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import anyio
import mcp.client.stdio
import pytest

from bridge.config.file import ServerConfig
from bridge.door.model import ConversationKey, MessageIn
from bridge.host import Host
from bridge.safety.limits import Limits
from bridge.servers.prestart import Prestarts
from bridge.servers.stdio import INHERITED, LineSplitter
from tests.harness.hosts import ALICE, ROOM, FakeChatPort, config_for, host_for, patient

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]
ROOT = Path(__file__).resolve().parents[2]
WHOAMI = ServerConfig(name="who", command=sys.executable, args=("-m", "tests.servers.whoami"), cwd=str(ROOT),
                      env={"GREETING": "hello"}, prestart=True)
CRASHY = ServerConfig(name="crashy", command=sys.executable, args=("-m", "tests.servers.crashy"), cwd=str(ROOT),
                      prestart=True)
ELSEWHERE = ConversationKey("test", "W1", "C2", "T9")


@asynccontextmanager
async def bridge(*servers: ServerConfig, limits: Limits | None = None,
                 ) -> AsyncIterator[tuple[Host, FakeChatPort, Prestarts]]:
    prestarts = Prestarts()
    try:
        await prestarts.start(servers)
        host, chat = await host_for(config_for({s.name: s for s in servers}, limits=limits or Limits()),
                                    prestarts=prestarts)
        async with host:
            yield host, chat, prestarts
    finally:
        await prestarts.aclose()


async def ask(host: Host, chat: FakeChatPort, text: str, conversation: ConversationKey = ROOM) -> str:
    server_tool = text.split()[1] + "." + text.split()[2]
    before = len(chat.messages)
    await host.run_message(MessageIn(conversation, ALICE, text, explicit_command=True))
    with anyio.fail_after(patient(30)):
        reply = await chat.wait_for(lambda: next((m.text for m in chat.messages[before:]
                                                  if m.text.startswith(server_tool)), None))
    return reply.split("\n", 1)[1].strip()


async def test_the_first_session_adopts_the_process_started_ahead(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOT_FOR_SERVERS", "secret")  # the SDK passes servers only a few variables; so do we
    async with bridge(replace(WHOAMI, scope="conversation")) as (host, chat, prestarts):
        started = prestarts._waiting["who"][1].process
        assert await ask(host, chat, "call who pid") == str(started.pid)
        assert await ask(host, chat, 'call who env {"name": "GREETING"}') == "hello"
        assert await ask(host, chat, 'call who env {"name": "NOT_FOR_SERVERS"}') == "-"
        # Another conversation gets a session, and a process, of its own (`scope: conversation`).
        assert await ask(host, chat, "call who pid", ELSEWHERE) not in (str(started.pid), "")
    assert started.returncode is not None  # stopped with its session


async def test_a_process_nobody_used_is_stopped_with_the_bridge() -> None:
    async with bridge(WHOAMI) as (_, _, prestarts):
        started = prestarts._waiting["who"][1].process
    assert started.returncode is not None


async def test_a_process_that_died_meanwhile_is_not_adopted() -> None:
    async with bridge(WHOAMI) as (host, chat, prestarts):
        dead = prestarts._waiting["who"][1].process
        os.kill(dead.pid, signal.SIGKILL)
        await dead.wait()
        assert await ask(host, chat, "call who pid") not in (str(dead.pid), "")


async def test_an_adopted_servers_last_words_are_reported() -> None:
    async with bridge(CRASHY) as (host, chat, _):
        await host.run_message(MessageIn(ROOM, ALICE, "call crashy crash", explicit_command=True))
        with anyio.fail_after(patient(30)):
            text = await chat.wait_message("flux capacitor")
    assert "crashy stopped during the call" in text


@pytest.mark.parametrize("prestart", [True, False])
async def test_a_long_result_reaches_chat_whole_through_the_bridges_stdio_reader(prestart: bool) -> None:
    size = 3_000_007  # about 46 of the pipe's 64 KB reads for one line
    server = replace(WHOAMI, prestart=prestart)
    async with bridge(server, limits=Limits(tool_result_size=4 * 1024**2)) as (host, chat, prestarts):
        assert ("who" in prestarts._waiting) is prestart
        head = await ask(host, chat, f'call who text {{"size": {size}}}')
        result_id = head.rsplit("`show ", 1)[1].split("`", 1)[0]
        await host.run_message(MessageIn(ROOM, ALICE, f"show {result_id}", explicit_command=True))
        whole = chat.messages[-1].text
    assert whole.endswith("x\n" + "y" * 7)
    assert whole.count("x" * 99 + "\n") == size // 100 and len(whole) < size + 200


def test_lines_split_across_chunks_and_many_in_one_chunk() -> None:
    lines = LineSplitter()
    assert lines.feed(b"ab") == [] and lines.feed(b"c") == []
    assert lines.feed(b"d\ne\n\nf") == [bytearray(b"abcd"), bytearray(b"e"), bytearray()]
    assert lines.feed(b"g\n") == [bytearray(b"fg")] and lines.feed(b"") == []
    chunks = [b"x" * 65536] * 100 + [b"\n" + b"1\n" * 10_000]
    out = [line for chunk in chunks for line in lines.feed(chunk)]
    assert out[0] == bytearray(b"x" * (65536 * 100)) and out[1:] == [bytearray(b"1")] * 10_000


def test_servers_get_the_variables_the_sdk_gives_them() -> None:
    assert tuple(mcp.client.stdio.DEFAULT_INHERITED_ENV_VARS) == INHERITED


async def test_only_enabled_stdio_servers_marked_prestart_are_started() -> None:
    prestarts = Prestarts()
    try:
        await prestarts.start([
            ServerConfig(name="off", command=sys.executable, args=("-c", "pass"), prestart=False),
            ServerConfig(name="disabled", command=sys.executable, args=("-c", "pass"), prestart=True, disabled=True),
            ServerConfig(name="remote", url="http://127.0.0.1:9/mcp", prestart=True),
            ServerConfig(name="missing", command="/nonexistent/server", prestart=True),
        ])
        assert prestarts._waiting == {}
    finally:
        await prestarts.aclose()
