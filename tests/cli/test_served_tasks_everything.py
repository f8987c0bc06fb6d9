"""server-everything's `trigger-elicitation-request-async` and `trigger-sampling-request-async` through the console:
the server sends its request as a task, polls `tasks/get` every second, and reads `tasks/result` once the task ended.
A person answers only after the server has polled several times (the bridge counts the polls it answered)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bridge.config.file import SamplingPolicy
from bridge.host import Host
from tests.cli.test_everything_features import HostScript, Screen, drive_host

pytestmark = pytest.mark.anyio

POLLS = 3


async def drive(everything_js: Path, script: HostScript, **fields: Any) -> str:
    return await drive_host(everything_js, script, 60, **fields)


async def test_an_async_elicitation_is_answered_after_several_polls(everything_js: Path) -> None:
    async def script(host: Host, screen: Screen) -> AsyncIterator[str]:
        yield "!mcp call everything trigger-elicitation-request-async"
        await screen.wait_for("Please provide inputs for the following fields (async task demo)")
        await host.served_tasks.wait_polls(POLLS)
        for answer in ("Ada", "2", "yes", "accept"):
            yield answer
        await screen.wait_for("Raw result")

    out = await drive(everything_js, script)
    assert "[COMPLETED] User provided the requested information!" in out
    assert "- Name: Ada" in out and "- Favorite Color: Blue" in out and "- Agreed to terms: true" in out
    assert "Poll 1: input_required - waiting for a person to answer" in out
    assert "Poll " in out.split("Poll 1:", 1)[1]  # more polls after the first, until the answer came
    assert "completed - answered" in out


async def test_an_async_elicitation_declined(everything_js: Path) -> None:
    async def script(host: Host, screen: Screen) -> AsyncIterator[str]:
        yield "!mcp call everything trigger-elicitation-request-async"
        await screen.wait_for("async task demo")
        await host.served_tasks.wait_polls(1)
        yield "!decline"
        await screen.wait_for("Raw result")

    out = await drive(everything_js, script)
    assert "[DECLINED] User declined to provide the requested information." in out
    assert "completed - declined by a person" in out


async def test_an_async_sampling_request_is_approved_and_answered_after_several_polls(everything_js: Path) -> None:
    async def script(host: Host, screen: Screen) -> AsyncIterator[str]:
        yield '!mcp call everything trigger-sampling-request-async {"prompt": "meaning of life?", "maxTokens": 20}'
        await screen.wait_for("Resource trigger-sampling-request-async context: meaning of life?")
        await host.served_tasks.wait_polls(POLLS)
        yield "approve"
        yield "42"
        yield "send"
        await screen.wait_for("Async sampling completed")

    out = await drive(everything_js, script)
    assert "input_required - waiting for a person to answer" in out
    assert "completed - answered" in out
    assert '"text": "42"' in out and '"model": "human"' in out
    assert "io.modelcontextprotocol/related-task" in out


async def test_an_async_sampling_request_denied_fails_the_task(everything_js: Path) -> None:
    async def script(host: Host, screen: Screen) -> AsyncIterator[str]:
        yield '!mcp call everything trigger-sampling-request-async {"prompt": "meaning of life?"}'
        await screen.wait_for("meaning of life?")
        await host.served_tasks.wait_polls(1)
        yield "deny"
        await screen.wait_for("[FAILED]")

    out = await drive(everything_js, script)
    assert "[FAILED] User rejected sampling request (a person said no)" in out


async def test_an_async_sampling_request_nobody_answers_fails_its_task(everything_js: Path) -> None:
    async def script(host: Host, screen: Screen) -> AsyncIterator[str]:
        yield '!mcp call everything trigger-sampling-request-async {"prompt": "meaning of life?"}'
        await screen.wait_for("[FAILED]")

    out = await drive(everything_js, script, sampling=SamplingPolicy(timeout=1.0))
    assert "[FAILED] User rejected sampling request (nobody answered in time)" in out
