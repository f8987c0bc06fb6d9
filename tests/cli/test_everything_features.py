"""server-everything's sampling, roots, progress, logging, prompts and resources, driven through the console adapter.

The script is an async generator that can wait for something to appear on the console before typing its next
line, the way a person would.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from adapters.console import ConsoleAdapter
from bridge.config.file import RootsPolicy, ServerConfig
from bridge.host import Host
from tests.harness.hosts import config_for, host_store, patient

pytestmark = pytest.mark.anyio


class Screen(io.StringIO):
    """The console's output, with a way to wait until some text shows up."""

    def __init__(self) -> None:
        super().__init__()
        self._changed = anyio.Event()

    def write(self, text: str) -> int:
        written = super().write(text)
        self._changed.set()
        self._changed = anyio.Event()
        return written

    async def wait_for(self, text: str, start: int = 0) -> int:
        while (found := self.getvalue().find(text, start)) < 0:
            await self._changed.wait()
        return found + len(text)


Script = Callable[[Screen], AsyncIterator[str]]
HostScript = Callable[[Host, Screen], AsyncIterator[str]]
"""A script that also watches the host (say, the task polls it answered)."""


async def drive(everything_js: Path, script: Script, **fields: Any) -> str:
    return await drive_host(everything_js, lambda _, screen: script(screen), 45, **fields)


async def drive_host(everything_js: Path, script: HostScript, seconds: float, **fields: Any) -> str:
    """Run `script` on the console of a host with server-everything (over stdio, configured with `fields`); all the
    console showed."""
    server = ServerConfig(name="everything", command="node", args=(str(everything_js), "stdio"), **fields)
    screen = Screen()
    config = config_for({"everything": server})
    host = Host(config, await host_store(config))
    async with host:
        console = ConsoleAdapter(host, script(host, screen), screen)
        host.attach(console)
        with anyio.fail_after(patient(seconds)):
            await console.serve()
    return screen.getvalue()


async def test_sampling_request_is_approved_and_the_reviewer_writes_the_answer(everything_js: Path) -> None:
    async def script(screen: Screen) -> AsyncIterator[str]:
        yield '!mcp call everything trigger-sampling-request {"prompt": "meaning of life?", "maxTokens": 20}'
        yield "approve"
        yield "42"
        yield "send"
        await screen.wait_for("LLM sampling result")

    out = await drive(everything_js, script)
    assert "System prompt: You are a helpful test server." in out
    assert "Message 1 (user): Resource trigger-sampling-request context: meaning of life?" in out
    assert '"text": "42"' in out and '"model": "human"' in out


async def test_roots_are_shared_after_approval_and_changes_reach_the_server(everything_js: Path) -> None:
    async def script(screen: Screen) -> AsyncIterator[str]:
        yield "!mcp roots add file:///srv/research research"
        await screen.wait_for("Added file:///srv/research.")
        yield '!mcp call everything echo {"message": "hello"}'
        # server-everything asks for roots shortly after the session starts: the card asks us which to share.
        await screen.wait_for("which folders it may see")
        yield "share"
        await screen.wait_for("Roots updated: 1 root(s)")
        yield "!mcp call everything get-roots-list"
        at = await screen.wait_for("1. research")
        yield "!mcp roots add file:///srv/more"
        # A legacy session is told the list changed and asks again: a second card.
        await screen.wait_for("which folders it may see", at)
        yield "share"
        await screen.wait_for("Roots updated: 2 root(s)")

    out = await drive(everything_js, script, log_level="info")
    assert "URI: file:///srv/research" in out
    assert out.count("accepted by you") == 2


async def test_roots_approval_auto_shares_without_asking(everything_js: Path) -> None:
    async def script(screen: Screen) -> AsyncIterator[str]:
        yield '!mcp call everything echo {"message": "hello"}'
        await screen.wait_for("Roots updated: 1 root(s)")
        yield "!mcp call everything get-roots-list"
        await screen.wait_for("URI: file:///data")

    out = await drive(everything_js, script, log_level="info",
                      roots=RootsPolicy(approval="auto", defaults=(("file:///data", "data"),)))
    assert "which folders" not in out


async def test_long_running_operation_shows_progress(everything_js: Path) -> None:
    async def script(screen: Screen) -> AsyncIterator[str]:
        yield '!mcp call everything trigger-long-running-operation {"duration": 0.3, "steps": 3}'
        await screen.wait_for("Long running operation completed")

    out = await drive(everything_js, script)
    assert "… everything.trigger-long-running-operation [#######-------------] 1/3" in out
    assert "[####################] 3/3" in out


async def test_simulated_logging_reaches_the_conversation(everything_js: Path) -> None:
    async def script(screen: Screen) -> AsyncIterator[str]:
        yield "!mcp call everything toggle-simulated-logging"
        await screen.wait_for("Started simulated")
        await screen.wait_for("[everything ")  # the first simulated message, at debug level or above
        yield "!mcp call everything toggle-simulated-logging"
        await screen.wait_for("Stopped simulated")

    out = await drive(everything_js, script, log_level="debug")
    assert "[everything " in out


async def test_prompts_with_completion_and_resources(everything_js: Path) -> None:
    async def script(screen: Screen) -> AsyncIterator[str]:
        yield "!mcp prompts everything"
        yield "!mcp prompt everything args-prompt city=Paris"
        await screen.wait_for("What's weather in Paris?")
        yield "!mcp prompt everything completable-prompt"
        yield "Engineering"
        yield "submit"
        yield "2"
        yield "submit"
        await screen.wait_for("Please promote")
        yield "!mcp resources everything"
        yield "!mcp read everything demo://resource/static/document/startup.md"
        await screen.wait_for("Startup Process")

    out = await drive(everything_js, script)
    assert "• completable-prompt: First argument choice narrows values for second argument." in out
    assert "(arguments: department*, name*)" in out
    # The second argument's options come from completion/complete, narrowed by the first answer.
    assert "1. Alice\n│    2. Bob\n│    3. Charlie" in out
    assert "Please promote Bob to the head of the Engineering team." in out
    assert "everything: 7 resources" in out
    assert "• demo://resource/static/document/architecture.md: architecture.md, text/markdown" in out


async def test_a_task_shows_its_stages_on_the_console_and_stop_cancels_one_at_the_server(everything_js: Path) -> None:
    async def script(screen: Screen) -> AsyncIterator[str]:
        yield '!mcp call everything simulate-research-query {"topic": "tides"}'
        done = await screen.wait_for("# Research Report: tides")
        yield '!mcp call everything simulate-research-query {"topic": "moons"}'
        await screen.wait_for("simulate-research-query task working", done)
        yield "!mcp stop"
        await screen.wait_for("Stopped everything.simulate-research-query", done)

    out = await drive(everything_js, script)
    first, second = out.split("# Research Report: tides")
    stages = ("Gathering sources", "Analyzing content", "Synthesizing findings", "Generating report")
    shown = [s for s in stages if f"everything.simulate-research-query task working: {s}..." in first]
    # Polled at the server's pollInterval (1 s) while each stage takes about 1 s: one may pass between two polls.
    assert len(shown) >= 3, first
    assert "everything.simulate-research-query: task completed · " in first
    assert "the server reports the task cancelled (Client cancelled task execution.)" in second
    assert "task cancelled: Client cancelled task execution." in second and "(stopped by " in second
