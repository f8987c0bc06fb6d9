"""Taking over a dead worker's work on one Postgres store, with the interleavings that once went wrong made to happen
at a chosen point (a store hook in the test, not luck): a click landing as the take-over reads the call, a worker
dying between storing a decision and showing it. (Killing a real worker process: tests/cli/test_takeover.py.)"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any
from unittest.mock import patch

import anyio
import pytest
from mcp.types import InputRequest

from bridge.calls.rounds import ParkedCall
from bridge.calls.toolcalls import ToolCalls
from bridge.door.model import CardRef, DecisionIn, Interaction, MessageIn, Outcome, Status, Verdict
from bridge.host import Host
from bridge.storage import Reaped, SqlStore, open_store
from tests.harness.hosts import ALICE, ROOM, FakeChatPort, config_for, host_for, patient
from tests.servers.inline import form_server
from tests.storage.support import interaction

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
        self.started = anyio.Event()

    def wrap(self, calls: ToolCalls) -> Callable[[ParkedCall, Mapping[str, InputRequest]], Awaitable[None]]:
        real = calls.continue_call

        async def counted(record: ParkedCall, missing: Mapping[str, InputRequest]) -> None:
            self.started.set()
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
                with anyio.fail_after(patient(20)):
                    card = await card_on(a, chat_a)
            # a is gone: its parked 2026 call waits in the store for whoever takes it over.
            reap = opened["c"].reap_workers
            clicked: list[Verdict] = []

            async def reap_then_click(**kw: Any) -> Reaped:
                reaped = await reap(**kw)
                if reaped.pending_calls and not clicked:
                    # The click reaches b just as c has taken the call over, before c reads its cards.
                    clicked.append((await b.decide(DecisionIn(card.id, ALICE, "accept", {"n": 5}))).verdict)
                    # The claim made the call b's: b takes it up in its own task (not in the click's).
                    await continued.started.wait()
                return reaped

            continued = Continuations()
            c, chat_c = await host_for(config_for({"forms": server}, server_protocol="auto"), opened["c"])
            with patch.object(opened["c"], "reap_workers", reap_then_click), \
                    patch.object(b.calls, "continue_call", continued.wrap(b.calls)), \
                    patch.object(c.calls, "continue_call", continued.wrap(c.calls)):
                async with c:
                    with anyio.fail_after(patient(20)):
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


async def test_a_card_decided_by_a_worker_that_died_before_showing_it_is_shown_final_by_a_survivor(
        pg_url: str) -> None:
    server = form_server()
    async with stores(pg_url, "a", "b") as opened:
        # a holds a legacy card (its server session waits on it) and looks for stopped workers every second.
        a, chat_a = await host_for(config_for({"forms": server}, server_protocol="legacy", worker_lease=3),
                                   opened["a"])
        async with a:
            with anyio.fail_after(patient(20)):
                card = await card_on(a, chat_a)
                # b took the click and stored the decision, then died before editing the card: its lease lapses.
                # a hears the decision and answers its server; the card was b's to finish.
                stored = await opened["b"].interaction(card.id)
                assert stored is not None
                outcome = Outcome(Status.ACCEPTED, {"n": 4}, ALICE)
                assert await opened["b"].claim(stored.interaction, outcome)
                await opened["b"].heartbeat(0)
                await chat_a.wait_message("forms.fill:")
                shown = await chat_a.wait_finished(card.id)
    assert shown.status is Status.ACCEPTED and shown.content == {"n": 4}
    assert chat_a.finish_calls == [(card.id, shown)]  # shown once, by the survivor that took b's work over


async def test_a_worker_restarted_under_its_own_id_shows_final_what_it_decided_and_never_showed(
        pg_url: str) -> None:
    card = interaction(expires_at=time.time() + 600)
    async with stores(pg_url, "a") as opened:
        # Worker a posted a card, stored a decision on it, and was killed before editing it (its lease still runs).
        await opened["a"].save_interaction(card)
        await opened["a"].set_card(card.id, CardRef(card.id, {"ts": "1.1"}))
        assert await opened["a"].claim(card, Outcome(Status.DECLINED, by=ALICE))
    async with stores(pg_url, "b") as survivor:
        # A survivor leaves it alone (a's lease runs), and a restarts under its own id before the lease lapses.
        assert (await survivor["b"].reap_workers()).decided == ()
        async with stores(pg_url, "a") as opened:
            host, chat = await host_for(config_for({"forms": form_server()}), opened["a"])
            async with host:
                with anyio.fail_after(patient(20)):
                    await host.resumed.wait()
                    shown = await chat.wait_finished(card.id)
        again = await survivor["b"].reap_workers(now=time.time() + 3600)  # and it stays shown, whoever looks
    assert shown.status is Status.DECLINED and chat.finish_calls == [(card.id, shown)]
    assert again.decided == ()
