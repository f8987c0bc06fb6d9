"""`limits.message_size`: a server's message is refused as it is read, past the bound, over stdio (adopted or
spawned) and streamable HTTP (a JSON body or an event stream); the call ends with a notice naming the server and the
size, and the next call works."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import anyio
import pytest
from mcp.server.mcpserver import MCPServer

from bridge.config.file import ServerConfig
from bridge.door.model import MessageIn
from bridge.safety.limits import Limits, from_mapping
from bridge.servers.message_bound import EventSizes
from bridge.servers.stdio import TOO_LONG, LineSplitter
from tests.bridge.test_prestart import WHOAMI, ask, bridge
from tests.harness.hosts import ALICE, ROOM, config_for, host_for, patient
from tests.servers.serving import serve

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]
ROOT = Path(__file__).resolve().parents[2]
LIMIT = 1024**2
BIG = 3 * LIMIT
"""A result three times the bound: one JSON-RPC line (or body, or event) of about 6 MB with its structured copy."""


def refused_notice(text: str, server: str) -> None:
    assert f"{server} sent a message" in text, text
    assert "over this bridge's limit of 1.0 MB (limits.message_size)" in text, text
    assert "Traceback" not in text and "Failed to parse" not in text and "SSE stream" not in text, text


@pytest.mark.parametrize("prestart", [True, False])
async def test_a_stdio_line_past_the_bound_ends_the_call_with_a_notice_and_the_server_restarts(prestart: bool) -> None:
    async with bridge(replace(WHOAMI, prestart=prestart), limits=Limits(message_size=LIMIT)) as (host, chat, _):
        first = await ask(host, chat, "call who pid")
        before = len(chat.messages)
        await host.run_message(MessageIn(ROOM, ALICE, f'call who text {{"size": {BIG}}}', explicit_command=True))
        with anyio.fail_after(patient(30)):
            notice = await chat.wait_for(lambda: next((m.text for m in chat.messages[before:]
                                                       if "limits.message_size" in m.text), None))
        refused_notice(notice, "who")
        assert "larger than 1.0 MB" in notice and "started again on next use" in notice
        # A fresh process answers the next call; a result within the bound still arrives whole.
        assert await ask(host, chat, "call who pid") not in (first, "")
        assert (await ask(host, chat, 'call who text {"size": 1000}')).count("x") == 990


def big_server() -> MCPServer:
    server = MCPServer("web")

    @server.tool()
    def text(size: int) -> str:
        """`size` characters."""
        return "x" * size

    return server


@pytest.mark.parametrize("json_response", [True, False], ids=["json-body", "event-stream"])
async def test_an_http_answer_past_the_bound_ends_only_that_call_with_a_notice(json_response: bool) -> None:
    app = big_server().streamable_http_app(json_response=json_response)
    with serve(app) as base:
        web = ServerConfig(name="web", url=f"{base}/mcp", protocol="legacy")
        host, chat = await host_for(config_for({"web": web}, limits=Limits(message_size=LIMIT)))
        async with host:
            before = len(chat.messages)
            await host.run_message(MessageIn(ROOM, ALICE, f'call web text {{"size": {BIG}}}', explicit_command=True))
            with anyio.fail_after(patient(30)):
                notice = await chat.wait_for(lambda: next((m.text for m in chat.messages[before:]
                                                           if "limits.message_size" in m.text), None))
            refused_notice(notice, "web")
            assert "it was not read" in notice and "started again" not in notice
            session = host.pool.find(ROOM, "web")
            assert session is not None
            assert await ask(host, chat, 'call web text {"size": 5}') == "xxxxx"
            assert host.pool.find(ROOM, "web") is session  # the same session: only the refused answer was lost


def test_call_prints_the_notice_and_no_traceback(tmp_path: Path) -> None:
    config = tmp_path / "bridge.yaml"
    config.write_text(json.dumps({
        "limits": {"message_size": "1MB"},
        "servers": {"who": {"command": sys.executable, "args": ["-m", "tests.servers.whoami"], "cwd": str(ROOT)}},
    }))
    done = subprocess.run([sys.executable, "-m", "bridge.cli", "call", "-c", str(config), "who", "text",
                           json.dumps({"size": BIG})], capture_output=True, text=True, timeout=120, check=False,
                          cwd=ROOT, stdin=subprocess.DEVNULL)
    assert done.returncode != 0
    refused_notice(done.stdout + done.stderr, "who")


def test_a_line_is_kept_only_up_to_the_bound_and_the_rest_of_it_skipped() -> None:
    lines = LineSplitter(10)
    assert lines.feed(b"0123456789\nab") == [bytearray(b"0123456789")]
    assert lines.feed(b"cdefghi") == []
    assert lines.feed(b"jk") == [TOO_LONG]  # at once, not at the line's end
    assert lines.feed(b"x" * 100) == [] and lines.held == 0  # nothing of it is kept
    assert lines.feed(b"yy\nshort\n" + b"z" * 11 + b"\n\n") == [bytearray(b"short"), TOO_LONG, bytearray()]


def test_event_sizes_count_from_the_last_blank_line() -> None:
    sizes = EventSizes()
    assert sizes.feed(b"data: abc\n") == 10
    assert sizes.feed(b"\ndata: 12") == 8  # the blank line spans two chunks
    assert sizes.feed(b"345\r\n\r\n") == 0
    assert sizes.feed(b"x" * 50) == 50 and sizes.feed(b"y" * 50) == 100


def test_the_bound_defaults_to_four_results_and_at_least_16_mb() -> None:
    assert Limits().message_limit == 16 * 1024**2
    assert Limits(tool_result_size=8 * 1024**2).message_limit == 32 * 1024**2
    assert from_mapping({"message_size": "2MB"}).message_limit == 2 * 1024**2


async def test_a_greeting_past_the_bound_is_named_as_the_reason_the_server_did_not_start() -> None:
    wordy = ServerConfig(name="wordy", command=sys.executable, args=(
        "-c", f"from mcp.server.mcpserver import MCPServer; MCPServer('wordy', instructions='w' * {BIG}).run()"))
    host, chat = await host_for(config_for({"wordy": wordy}, limits=Limits(message_size=LIMIT)))
    async with host:
        await host.run_message(MessageIn(ROOM, ALICE, "call wordy anything", explicit_command=True))
        with anyio.fail_after(patient(30)):
            report = await chat.wait_message("failed to start")
    refused_notice(report, "wordy")
