"""Taking over a dead worker's work on one Postgres store, with the interleavings that once went wrong made to happen
at a chosen point (a store hook in the test, not luck): a click landing as the take-over reads the call, a worker
dying between storing a decision and showing it. (Killing a real worker process: tests/cli/test_takeover.py.)"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any
from unittest.mock import patch

import anyio
import pytest
from mcp.types import InputRequest

from bridge.host import Host
from bridge.model import DecisionIn, Interaction, MessageIn, Verdict
from bridge.rounds import ParkedCall
from bridge.storage import Reaped, SqlStore, open_store
from bridge.testing import ALICE, ROOM, FakeChatPort, config_for, host_for
from bridge.toolcalls import ToolCalls
from tests.servers.inline import form_server

pytestmark = pytest.mark.anyio

SCHEMA = json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})


@asynccontextmanager
async def stores(url: str, *names: str) -> AsyncIterator[dict[str, SqlStore]]:
    async with AsyncExitStack() as stack:
        opened = {}
        for name in names:
            opened[name] = await open_store(url, worker_id=name)
            stack.push_async_callback(opened[name].aclose)
        yield opened


async def card_on(host: Host, chat: FakeChatPort) -> Interaction:
    await host.handle_message(MessageIn(ROOM, ALICE, f"call forms fill {json.dumps({'schema': SCHEMA})}",
                                        explicit_command=True))
    card = await chat.wait_card()
    await host.broker.wait_open(card.id)
    return card


class Continuations:
    """Counts the continuations of stored calls that ran to their end, on any of the hosts given."""

    def __init__(self) -> None:
        self.ended: list[str] = []
        self._changed = anyio.Event()

    def wrap(self, calls: ToolCalls) -> Callable[[ParkedCall, Mapping[str, InputRequest]], Awaitable[None]]:
        real = calls.continue_call

        async def counted(record: ParkedCall, missing: Mapping[str, InputRequest]) -> None:
            try:
                await real(record, missing)
            finally:
                self.ended.append(record.id)
                self._changed.set()
                self._changed = anyio.Event()

        return counted

    async def wait(self, n: int) -> None:
        while len(self.ended) < n:
            await self._changed.wait()


def reports(*chats: FakeChatPort, head: str = "forms.fill:") -> list[str]:
    return [m.text for chat in chats for m in chat.messages if m.text.startswith(head)]


async def test_a_click_landing_as_a_survivor_takes_the_call_over_continues_it_once(pg_url: str) -> None:
    server = form_server()
    async with stores(pg_url, "a", "b", "c") as opened:
        # b lives throughout; its own look for stopped workers is far off, so the take-over is c's, at its start.
        b, chat_b = await host_for(config_for({"forms": server}, server_protocol="auto", worker_lease=600),
                                   opened["b"])
        async with b:
            a, chat_a = await host_for(config_for({"forms": server}, server_protocol="auto"), opened["a"])
            async with a:
                with anyio.fail_after(20):
                    card = await card_on(a, chat_a)
            # a is gone: its parked 2026 call waits in the store for whoever takes it over.
            reap = opened["c"].reap_workers
            clicked: list[Verdict] = []

            async def reap_then_click(**kw: Any) -> Reaped:
                reaped = await reap(**kw)
                if reaped.pending_calls and not clicked:
                    # The click reaches b just as c has taken the call over, before c reads its cards.
                    clicked.append((await b.decide(DecisionIn(card.id, ALICE, "accept", {"n": 5}))).verdict)
                return reaped

            continued = Continuations()
            c, chat_c = await host_for(config_for({"forms": server}, server_protocol="auto"), opened["c"])
            with patch.object(opened["c"], "reap_workers", reap_then_click), \
                    patch.object(b.calls, "continue_call", continued.wrap(b.calls)), \
                    patch.object(c.calls, "continue_call", continued.wrap(c.calls)):
                async with c:
                    with anyio.fail_after(20):
                        await c.resumed.wait()
                        await continued.wait(2)  # b's (the click's claim) and c's (the take-over), to their ends
            rows = await opened["b"].audit_rows(card.id)
            [(left,)] = await opened["b"].driver.fetch("SELECT count(*) FROM pending_calls")
    assert clicked == [Verdict.CLAIMED]
    done = reports(chat_a, chat_b, chat_c)
    assert len(done) == 1, done  # the server had the answer once, and its result was posted once
    assert json.loads(done[0].split("\n", 1)[1])["content"] == {"n": 5}
    assert [(r.outcome, r.actor) for r in rows] == [("accepted", ALICE.key)]
    assert left == 0
