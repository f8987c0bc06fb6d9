"""server-everything over streamable HTTP: its async elicitation, sent as a task on the tool call's stream and polled
for there, is answered after several polls."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from anyio.streams.text import TextReceiveStream

from bridge.config.file import ServerConfig
from bridge.door.model import DecisionIn, MessageIn
from tests.harness.fleet import free_port
from tests.harness.hosts import ALICE, ROOM, config_for, host_for, patient

pytestmark = pytest.mark.anyio


@pytest.fixture
async def everything_http(everything_js: Path) -> AsyncIterator[str]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    port = free_port()
    env = {**os.environ, "PORT": str(port)}
    # Its request log goes to stdout (dropped); stderr says when it listens.
    async with await anyio.open_process([node, str(everything_js), "streamableHttp"], env=env,
                                        stdout=subprocess.DEVNULL) as process:
        assert process.stderr is not None
        seen = ""
        with anyio.fail_after(patient(30)):
            async for chunk in TextReceiveStream(process.stderr):
                seen += chunk
                if "listening on port" in seen:
                    break
        try:
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            process.terminate()


async def test_an_async_elicitation_over_http_is_answered_after_several_polls(everything_http: str) -> None:
    server = ServerConfig(name="everything", url=everything_http)
    host, chat = await host_for(config_for({"everything": server}))
    async with host:
        with anyio.fail_after(patient(45)):
            await host.handle_message(MessageIn(ROOM, ALICE, "call everything trigger-elicitation-request-async",
                                                explicit_command=True))
            card = await chat.wait_card()
            await host.served_tasks.wait_polls(3)
            await host.decide(DecisionIn(card.id, ALICE, "accept", {"name": "Ada", "favoriteColor": "Green"}))
            done = await chat.wait_message("Raw result")
    assert "[COMPLETED] User provided the requested information!" in done
    assert "- Name: Ada" in done and "- Favorite Color: Green" in done
    assert "Poll 1: input_required - waiting for a person to answer" in done
