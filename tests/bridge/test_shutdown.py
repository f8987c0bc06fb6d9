"""A stopping host lets the calls that continue after their cards' answers finish before it cancels anything, for
up to its shutdown grace; a call still running then stays stored and goes on after the restart, as after a crash.

Its server, in process, holds the continued call until the test lets it go: the continuation is in flight exactly
when the host is told to stop (the piped console's end of input, SIGTERM).
"""

from __future__ import annotations

import logging

import anyio
import pytest
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ElicitRequest, ElicitRequestFormParams, ElicitResult, InputRequiredResult

from bridge.config.file import ServerConfig
from bridge.door.model import DecisionIn, MessageIn, Verdict
from bridge.storage import open_store
from tests.harness.hosts import ALICE, ROOM, config_for, host_for, patient

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

SCHEMA = {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}


class Held:
    """A 2026 server whose tool asks for a word, then holds its continuation until `release` is set."""

    def __init__(self) -> None:
        self.entered = anyio.Event()
        self.release = anyio.Event()
        self.server = MCPServer("held")

        @self.server.tool()
        async def echo(ctx: Context) -> str | InputRequiredResult:
            """Ask for a word and say it back, when let go."""
            answer = (ctx.input_responses or {}).get("word")
            if not isinstance(answer, ElicitResult):
                return InputRequiredResult(input_requests={"word": ElicitRequest(params=ElicitRequestFormParams(
                    message="A word?", requested_schema=SCHEMA))}, request_state="word")
            self.entered.set()
            await self.release.wait()
            return f"said: {(answer.content or {}).get('word')}"


def config(held: Held, **server: object) -> ServerConfig:
    return ServerConfig(name="held", inprocess=held.server, protocol="auto", **server)  # type: ignore[arg-type]


async def test_stopping_waits_for_a_call_continuing_after_its_card() -> None:
    held = Held()
    host, chat = await host_for(config_for({"held": config(held)}))

    async def let_go() -> None:
        await anyio.wait_all_tasks_blocked()  # the host is stopping, and the call at the server
        assert not any(m.text.startswith("held.echo:") for m in chat.messages)
        held.release.set()

    with anyio.fail_after(patient(20)):
        async with anyio.create_task_group() as tg, host:
            await host.handle_message(MessageIn(ROOM, ALICE, "call held echo", explicit_command=True))
            card = await chat.wait_card()
            assert (await host.decide(DecisionIn(card.id, ALICE, "accept", {"word": "kept"}))).verdict \
                is Verdict.CLAIMED
            await held.entered.wait()
            # The continuation is at the server: stopping now (as the console does at the end of its input)
            # waits for it, and lets it report its result once the server lets it go.
            tg.start_soon(let_go)
    assert any(m.text == "held.echo:\nsaid: kept" for m in chat.messages), [m.text for m in chat.messages]
    assert await host.store.pending_calls() == []


async def test_a_call_still_continuing_after_the_grace_is_left_for_the_restart(
        store_target: str, caplog: pytest.LogCaptureFixture) -> None:
    held = Held()
    # `resend`: the server says its tools may run again, so the call interrupted at shutdown is sent again.
    servers = {"held": config(held, on_interrupt="resend")}
    first = await open_store(store_target)
    host, chat = await host_for(config_for(servers), first, shutdown_grace=0.2)
    with anyio.fail_after(patient(20)):
        async with host:
            await host.handle_message(MessageIn(ROOM, ALICE, "call held echo", explicit_command=True))
            card = await chat.wait_card()
            await host.decide(DecisionIn(card.id, ALICE, "accept", {"word": "later"}))
            await held.entered.wait()  # and never let go: stopping gives up after its grace
    assert "left for the restart" in caplog.text
    assert [(p.server, p.tool) for p in await first.pending_calls()] == [("held", "echo")]
    assert not any(m.text.startswith("held.echo:") for m in chat.messages)
    await first.aclose()

    held.release.set()
    second = await open_store(store_target)
    host2, chat2 = await host_for(config_for(servers), second)
    async with host2:
        with anyio.fail_after(patient(20)):
            assert await chat2.wait_message("held.echo:") == "held.echo:\nsaid: later"
    assert await second.pending_calls() == []
    await second.aclose()


async def test_ctrl_c_does_not_wait_for_continuing_calls(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    held = Held()
    host, chat = await host_for(config_for({"held": config(held)}), shutdown_grace=3600)
    with anyio.fail_after(patient(10)):  # far below the grace
        async with host:
            await host.handle_message(MessageIn(ROOM, ALICE, "call held echo", explicit_command=True))
            card = await chat.wait_card()
            await host.decide(DecisionIn(card.id, ALICE, "accept", {"word": "cut"}))
            await held.entered.wait()
            host.stopping(cut_short=True)
    assert "left for the restart" not in caplog.text
    assert [(p.server, p.tool) for p in await host.store.pending_calls()] == [("held", "echo")]
