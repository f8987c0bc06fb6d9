"""Elicitation through the whole core, against real in-process MCP servers, on both protocol eras."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ElicitRequestFormParams

from bridge.config.file import ServerConfig
from bridge.door.model import CardRef, DecisionIn, Kind, MessageIn, ServerLabel, Status, Verdict
from bridge.host import Host
from bridge.requests import elicitation
from bridge.requests.request_context import RequestContext
from bridge.storage import AsyncStore, open_store
from bridge.text.plain import shorten
from tests.harness.hosts import ALICE, BOB, ROOM, FakeChatPort, config_for, host_for, patient
from tests.servers.inline import form_server

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

ERAS = ["legacy", "auto"]
EXPECTED_ERA = {"legacy": "2025-11-25", "auto": "2026-07-28"}


@asynccontextmanager
async def bridge(server: MCPServer, protocol: str, store: AsyncStore | None = None,
                 **overrides: Any) -> AsyncIterator[tuple[Host, FakeChatPort]]:
    host, chat = await host_for(config_for({"forms": server}, server_protocol=protocol, **overrides), store)
    async with host:
        yield host, chat


async def call(host: Host, tool: str, arguments: dict[str, Any] | None = None) -> None:
    text = f"call forms {tool}" + (f" {json.dumps(arguments)}" if arguments else "")
    await host.handle_message(MessageIn(ROOM, ALICE, text, explicit_command=True))


async def tool_result(chat: FakeChatPort, tool: str) -> dict[str, Any]:
    text = await chat.wait_message(f"forms.{tool}:")
    data: dict[str, Any] = json.loads(text.split("\n", 1)[1])
    return data


TYPED_ANSWER: dict[str, Any] = {
    "name": "Ada Lovelace", "email": "ada@example.com", "homepage": "https://example.org/ada",
    "start": "2026-12-01", "pickup": "2026-12-01T09:30:00Z", "travellers": "3", "budget": "99.5",
    "window": True, "climate": "cold", "city": "osl", "room": "x", "activities": ["hiking", "beach"],
    "extras": ["pk"],
}


@pytest.mark.parametrize("protocol", ERAS)
async def test_accept_with_every_field_type_reaches_the_server_typed(protocol: str) -> None:
    async with bridge(form_server(), protocol) as (host, chat):
        await call(host, "fill")
        with anyio.fail_after(patient(10)):
            card = await chat.wait_card()
            assert card.kind is Kind.FORM and card.server.name == "forms"
            assert card.requester == ALICE and card.approvers == {ALICE.key}
            result = await host.decide(DecisionIn(card.id, ALICE, "accept", TYPED_ANSWER))
            assert result.verdict is Verdict.CLAIMED
            data = await tool_result(chat, "fill")
    assert data["era"] == EXPECTED_ERA[protocol]
    assert data["action"] == "accept"
    assert data["content"] == {**TYPED_ANSWER, "travellers": 3, "budget": 99.5}
    assert isinstance(data["content"]["travellers"], int)
    assert chat.finished[card.id].status is Status.ACCEPTED
    assert chat.finished[card.id].by == ALICE


@pytest.mark.parametrize("protocol", ERAS)
@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_decline_and_cancel_reach_the_server(protocol: str, action: str) -> None:
    async with bridge(form_server(), protocol) as (host, chat):
        await call(host, "fill")
        with anyio.fail_after(patient(10)):
            card = await chat.wait_card()
            await host.decide(DecisionIn(card.id, ALICE, action))  # type: ignore[arg-type]
            data = await tool_result(chat, "fill")
    assert data == {"era": EXPECTED_ERA[protocol], "action": action, "content": None}
    assert chat.finished[card.id].status.value == {"decline": "declined", "cancel": "cancelled"}[action]
    rows = await host.store.audit_rows(card.id)
    assert [(r.outcome, r.actor, r.server) for r in rows] == [
        ({"decline": "declined", "cancel": "cancelled"}[action], ALICE.key, "forms")]


@pytest.mark.parametrize("protocol", ERAS)
async def test_timeout_cancels_at_the_server_and_the_card_shows_expired(protocol: str) -> None:
    server = form_server()
    async with bridge(server, protocol, server_elicitation_timeout=0.2) as (host, chat):
        await call(host, "fill")
        with anyio.fail_after(patient(10)):
            card = await chat.wait_card()
            outcome = await chat.wait_finished(card.id)
            data = await tool_result(chat, "fill")
    assert outcome.status is Status.EXPIRED
    assert data["action"] == "cancel"
    assert [r.outcome for r in await host.store.audit_rows(card.id)] == ["expired"]


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_strangers_decision_is_refused_privately_and_the_card_stays_open(protocol: str) -> None:
    async with bridge(form_server(), protocol) as (host, chat):
        await call(host, "fill", {"schema": json.dumps({"type": "object", "properties": {"ok": {"type": "boolean"}}})})
        with anyio.fail_after(patient(10)):
            card = await chat.wait_card()
            refused = await host.decide(DecisionIn(card.id, BOB, "accept", {"ok": True}))
            assert refused.verdict is Verdict.REFUSED
            assert chat.notices == [(BOB, "Only Alice can answer this request.")]
            assert card.id not in chat.finished
            await host.decide(DecisionIn(card.id, ALICE, "accept", {"ok": False}))
            data = await tool_result(chat, "fill")
    assert data["content"] == {"ok": False}


@pytest.mark.parametrize("protocol", ERAS)
async def test_configured_approvers_may_answer_for_the_requester(protocol: str) -> None:
    server = form_server()
    async with bridge(server, protocol, server_approvers=(BOB.key,)) as (host, chat):
        await call(host, "fill", {"schema": json.dumps({"type": "object", "properties": {"ok": {"type": "boolean"}}})})
        with anyio.fail_after(patient(10)):
            card = await chat.wait_card()
            assert (await host.decide(DecisionIn(card.id, BOB, "accept", {"ok": True}))).verdict is Verdict.CLAIMED
            data = await tool_result(chat, "fill")
    assert data["content"] == {"ok": True}
    assert (await host.store.audit_rows(card.id))[0].actor == BOB.key


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_duplicate_decision_is_ignored_with_a_notice(protocol: str) -> None:
    async with bridge(form_server(), protocol) as (host, chat):
        await call(host, "fill", {"schema": json.dumps({"type": "object", "properties": {"ok": {"type": "boolean"}}})})
        with anyio.fail_after(patient(10)):
            card = await chat.wait_card()
            first = host.broker.decide_nowait(DecisionIn(card.id, ALICE, "decline"))
            second = await host.decide(DecisionIn(card.id, ALICE, "accept", {"ok": True}))
            data = await tool_result(chat, "fill")
    assert (first.verdict, second.verdict) == (Verdict.CLAIMED, Verdict.LATE)
    assert chat.notices == [(ALICE, "That request was already declined by Alice.")]
    assert data["action"] == "decline"
    assert len(await host.store.audit_rows(card.id)) == 1


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_bad_answer_is_refused_with_field_errors_and_can_be_corrected(protocol: str) -> None:
    async with bridge(form_server(), protocol) as (host, chat):
        await call(host, "fill")
        with anyio.fail_after(patient(10)):
            card = await chat.wait_card()
            bad = await host.decide(DecisionIn(card.id, ALICE, "accept", {
                **TYPED_ANSWER, "email": "not-an-email", "travellers": "40", "activities": []}))
            assert bad.verdict is Verdict.INVALID
            assert set(bad.errors) == {"email", "travellers", "activities"}
            assert card.id not in chat.finished
            good = await host.decide(DecisionIn(card.id, ALICE, "accept", TYPED_ANSWER))
            assert good.verdict is Verdict.CLAIMED
            data = await tool_result(chat, "fill")
    assert data["content"]["email"] == "ada@example.com"


NESTED = json.dumps({"type": "object", "properties": {"address": {"type": "object", "properties": {}}}})


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_schema_outside_the_subset_is_refused_cleanly(protocol: str) -> None:
    async with bridge(form_server(), protocol) as (host, chat):
        await call(host, "fill", {"schema": NESTED})
        with anyio.fail_after(patient(10)):
            notice = await chat.wait_message("cannot show")
            failure = await chat.wait_message("forms.fill")
    assert "property 'address': type 'object' is not supported" in notice
    assert not chat.cards
    if protocol == "legacy":
        # The callback's -32602 is raised inside the server's tool, which reports it as a tool error.
        assert "Unsupported requestedSchema" in failure
    else:
        assert "was not continued: Unsupported requestedSchema" in failure


@pytest.mark.parametrize("protocol", ERAS)
async def test_url_elicitation_shows_the_full_url_and_host(protocol: str) -> None:
    async with bridge(form_server(), protocol) as (host, chat):
        await call(host, "visit")
        with anyio.fail_after(patient(10)):
            card = await chat.wait_card()
            assert card.kind is Kind.URL
            assert card.url == "https://xn--exmple-cua.com/login?x=1"
            # Shown as it reads, with the punycode the browser really contacts and a warning (issue 9).
            assert card.details[0].text == \
                "ex\u00e4mple.com (really xn--exmple-cua.com: an internationalised name, check it carefully)"
            await host.decide(DecisionIn(card.id, ALICE, "accept"))
            data = await tool_result(chat, "visit")
    assert data["action"] == "accept"


async def test_elicitation_disabled_cancels_without_asking() -> None:
    async with bridge(form_server(), "legacy", server_elicitation_enabled=False) as (host, chat):
        await call(host, "fill")
        with anyio.fail_after(patient(10)):
            data = await tool_result(chat, "fill")
    assert data["action"] == "cancel" and not chat.cards


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_failed_card_post_fails_the_request_without_crashing(protocol: str) -> None:
    async with bridge(form_server(), protocol) as (host, chat):
        chat.fail_posts = True
        await call(host, "fill")
        with anyio.fail_after(patient(10)):
            data = await tool_result(chat, "fill")
    assert data["action"] == "cancel"


async def test_a_crashed_server_is_reported_with_its_stderr_and_restarted() -> None:
    crashy = ServerConfig(name="crashy", command=sys.executable,
                          args=(str(Path(__file__).parent.parent / "servers/crashy.py"),))
    host, chat = await host_for(config_for({"crashy": crashy}))
    async with host:
        await host.handle_message(MessageIn(ROOM, ALICE, "call crashy crash", explicit_command=True))
        with anyio.fail_after(patient(20)):
            report = await chat.wait_message("stopped during the call")
        assert "flux capacitor overheated" in report
        assert "started again on next use" in report
        await host.handle_message(MessageIn(ROOM, ALICE, 'call crashy echo {"message": "back"}',
                                            explicit_command=True))
        with anyio.fail_after(patient(20)):
            assert await chat.wait_message("crashy.echo:") == "crashy.echo:\nback"


async def test_a_server_that_fails_to_start_is_reported_with_its_stderr() -> None:
    broken = ServerConfig(name="broken", command=sys.executable,
                          args=(str(Path(__file__).parent.parent / "servers/crashy.py"), "--fail-start"))
    host, chat = await host_for(config_for({"broken": broken}))
    async with host:
        await host.handle_message(MessageIn(ROOM, ALICE, "call broken echo", explicit_command=True))
        with anyio.fail_after(patient(20)):
            report = await chat.wait_message("failed to start")
    assert "missing API_TOKEN" in report


async def test_a_pending_2026_request_is_answered_after_the_bridge_restarts(store_target: str) -> None:
    server = form_server()
    store_path = store_target
    schema = json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    first = await open_store(store_path)
    async with bridge(server, "auto", store=first) as (host, chat):
        await call(host, "fill", {"schema": schema})
        with anyio.fail_after(patient(10)):
            card = await chat.wait_card()
        pending = await host.store.pending_calls()
        assert [(p.server, p.tool) for p in pending] == [("forms", "fill")]
    # The bridge stopped: the card was left open for later, not cancelled.
    assert card.id not in chat.finished
    await first.aclose()

    second = await open_store(store_path)
    host2, chat2 = await host_for(config_for({"forms": server}, server_protocol="auto"), second)
    async with host2:
        with anyio.fail_after(patient(10)):
            await host2.broker.wait_open(card.id)
            assert chat2.finish_calls == []  # resumed, not closed: the card still takes answers
            result = await host2.decide(DecisionIn(card.id, ALICE, "accept", {"n": "7"}))
            assert result.verdict is Verdict.CLAIMED
            data = await tool_result(chat2, "fill")
    assert data == {"era": "2026-07-28", "action": "accept", "content": {"n": 7}}
    assert chat2.finished[card.id].status is Status.ACCEPTED
    assert await second.pending_calls() == []
    await second.aclose()


async def test_shutdown_brings_legacy_cards_to_a_final_state() -> None:
    async with bridge(form_server(), "legacy") as (host, chat):
        await call(host, "fill")
        with anyio.fail_after(patient(10)):
            card = await chat.wait_card()
    outcome = chat.finished[card.id]
    assert outcome.status is Status.CANCELLED and "shutting down" in outcome.reason


def test_config_for_keeps_explicit_server_configs() -> None:
    cfg = ServerConfig(name="x", command="true")
    assert replace(config_for({"x": cfg}).servers["x"], inprocess=None) == cfg


async def test_a_legacy_completion_notice_updates_the_url_card() -> None:
    async with bridge(form_server(), "legacy") as (host, chat):
        await call(host, "visit")
        with anyio.fail_after(patient(10)):
            card = await chat.wait_card()
            await host.decide(DecisionIn(card.id, ALICE, "accept"))
            await tool_result(chat, "visit")
            done = await chat.wait_for(lambda: next((o for i, o in chat.finish_calls[1:] if i == card.id), None))
    assert done.status is Status.ACCEPTED and done.reason == "the server reports the link flow complete"
    assert done.by == ALICE


async def test_a_legacy_url_required_error_presents_its_links(everything_js: Path) -> None:
    everything = ServerConfig(name="everything", command="node", args=(str(everything_js), "stdio"))
    host, chat = await host_for(config_for({"everything": everything}))
    async with host:
        await host.handle_message(MessageIn(
            ROOM, ALICE, 'call everything trigger-url-elicitation {"url": "https://example.com/x", "errorPath": true}',
            explicit_command=True))
        with anyio.fail_after(patient(20)):
            note = await chat.wait_message("link(s) visited")
            card = await chat.wait_card("url")
            await host.decide(DecisionIn(card.id, ALICE, "accept"))
            await chat.wait_finished(card.id)
    assert "Run the call again when you are done" in note
    assert card.url == "https://modelcontextprotocol.io" and card.details[0].text == "modelcontextprotocol.io"


async def test_sessions_close_when_idle_and_the_pool_never_exceeds_its_maximum() -> None:
    server = form_server()
    other = replace(ROOM, thread="T2")
    # A session per conversation (on 2026, `scope: auto` would share one), so the second needs room.
    async with bridge(server, "auto", idle_timeout=0.5, max_sessions=1, server_scope="conversation") as (host, chat):
        await call(host, "echo", {"message": "one"})
        with anyio.fail_after(patient(10)):
            await chat.wait_message("forms.echo:\none")
            first = host.pool.find(ROOM, "forms")
            assert first is not None
            await host.handle_message(MessageIn(other, ALICE, 'call forms echo {"message": "two"}',
                                                explicit_command=True))
            await chat.wait_message("forms.echo:\ntwo")
            assert host.pool.find(ROOM, "forms") is None  # closed to make room
            [second] = host.pool.sessions()
            assert second.conversation == other
            await second.wait_closed()  # the idle reaper closes it after 0.5 s unused
    assert first.state.value == "closed" and second.state.value == "closed"
    assert host.pool.sessions() == []


async def test_a_server_request_finds_its_session_only_while_that_session_is_in_the_pool() -> None:
    async with bridge(form_server(), "legacy") as (host, _):
        session = await host.pool.get(ROOM, "forms")
        assert session.client is not None
        client_session = session.client.session
        assert host.pool.by_client(client_session) is session
        assert host.pool.by_client(object()) is None
        await host.pool.close(session)
        assert host.pool.by_client(client_session) is None


async def test_a_held_session_is_busy_until_released_even_when_its_holder_fails() -> None:
    async with bridge(form_server(), "legacy") as (host, _):
        session = await host.pool.get(ROOM, "forms")
        with host.pool.hold(session) as held:
            assert held is session and session.busy
            with pytest.raises(RuntimeError), host.pool.hold(session):
                raise RuntimeError("the holder failed")
            assert session.busy  # the outer hold still keeps it
        assert not session.busy


async def test_a_card_names_the_server_by_its_configured_title_else_the_one_it_reports() -> None:
    server = MCPServer("reported-name", title="Reported Title " + "x" * 80)
    async with bridge(server, "legacy") as (host, _):
        session = await host.pool.get(ROOM, "forms")
        reported = host.commands.audience.label("forms", session)
        assert reported == ServerLabel("forms", shorten("Reported Title " + "x" * 80, 60))  # theirs, capped
        assert host.commands.audience.label("forms", None) == ServerLabel("forms")
    configured = ServerConfig(name="forms", inprocess=server, title="Our Forms", protocol="legacy")
    host, _ = await host_for(config_for({"forms": configured}))
    async with host:
        session = await host.pool.get(ROOM, "forms")
        assert host.commands.audience.label("forms", session) == ServerLabel("forms", "Our Forms")


async def test_the_servers_command_shows_state_and_negotiated_version() -> None:
    async with bridge(form_server(), "legacy") as (host, chat):
        await host.handle_message(MessageIn(ROOM, ALICE, "servers", explicit_command=True))
        with anyio.fail_after(patient(10)):
            before = await chat.wait_message("Servers:")
            await call(host, "echo", {"message": "hi"})
            await chat.wait_message("forms.echo:")
            chat.messages.clear()
            await host.handle_message(MessageIn(ROOM, ALICE, "servers", explicit_command=True))
            after = await chat.wait_message("Servers:")
    assert "forms: not started (starts on first use)" in before
    assert "forms: ready, protocol 2025-11-25, reports forms" in after


async def test_a_shared_legacy_session_asks_in_the_conversation_of_the_call() -> None:
    other = replace(ROOM, thread="T2")
    schema = json.dumps({"type": "object", "properties": {"ok": {"type": "boolean"}}})
    async with bridge(form_server(), "legacy", server_scope="shared") as (host, chat):
        await call(host, "fill", {"schema": schema})
        with anyio.fail_after(patient(10)):
            first = await chat.wait_card()
            await host.handle_message(MessageIn(other, BOB, f"call forms fill {json.dumps({'schema': schema})}",
                                                explicit_command=True))
            await host.handle_message(MessageIn(other, BOB, 'call forms echo {"message": "queued"}',
                                                explicit_command=True))
            await host.decide(DecisionIn(first.id, ALICE, "accept", {"ok": True}))
            second = await chat.wait_card(index=1)
            await host.decide(DecisionIn(second.id, BOB, "accept", {"ok": False}))
            await chat.wait_message("forms.echo:\nqueued")
        assert len(host.pool.sessions()) == 1
    # 2025-11-25 does not say which open call a server request is for, so shared legacy calls run one at a time.
    assert (first.conversation, first.requester, first.approvers) == (ROOM, ALICE, frozenset({ALICE.key}))
    assert (second.conversation, second.requester, second.approvers) == (other, BOB, frozenset({BOB.key}))


async def test_cards_of_calls_that_died_with_the_process_are_finished_at_the_next_start(store_target: str) -> None:
    # What a hard crash (kill -9) leaves behind: a posted legacy card, open in the store, with no stored call.
    path = store_target
    crashed = await open_store(path)
    card = elicitation.form_interaction(
        RequestContext(ROOM, ServerLabel("forms"), ALICE, frozenset({ALICE.key})),
        ElicitRequestFormParams(message="Which?", requested_schema={"type": "object", "properties": {}}), 600)
    await crashed.save_interaction(card)
    await crashed.set_card(card.id, CardRef(card.id, {"n": "1"}))
    await crashed.aclose()
    store = await open_store(path)
    host, chat = await host_for(config_for({"forms": form_server()}), store)
    async with host:
        with anyio.fail_after(patient(10)):
            await host.resumed.wait()
    outcome = chat.finished[card.id]
    assert outcome.status is Status.FAILED and "the bridge stopped while this was open" in outcome.reason
    assert await store.open_interactions() == []
    assert [r.outcome for r in await store.audit_rows(card.id)] == ["failed"]
    # The conversation is told too: the server is no longer waiting, so the command must be run again.
    assert "The bridge stopped while a request from forms waited here" in await chat.wait_message("bridge stopped")
    await store.aclose()


async def test_a_stopped_2026_call_does_not_come_back_after_a_restart(store_target: str) -> None:
    store = await open_store(store_target)
    async with bridge(form_server(), "auto", store=store) as (host, chat):
        await call(host, "fill")
        with anyio.fail_after(patient(10)):
            card = await chat.wait_card()
            running = host.calls.find(ROOM, None)
            assert running is not None and await store.pending_calls() != []
            await host.stop_call(running.id, ALICE)
            await chat.wait_message("Stopped forms.fill.")
            await chat.wait_finished(card.id)
        assert await store.pending_calls() == []
    await store.aclose()


async def test_a_stored_call_whose_server_is_gone_is_abandoned_cleanly(store_target: str) -> None:
    path = store_target
    schema = json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}})
    first = await open_store(path)
    async with bridge(form_server(), "auto", store=first) as (host, chat):
        await call(host, "fill", {"schema": schema})
        with anyio.fail_after(patient(10)):
            card = await chat.wait_card()
    await first.aclose()
    # The config changed while the bridge was down: that server is gone.
    second = await open_store(path)
    host2, chat2 = await host_for(config_for({"other": form_server("other")}), second)
    async with host2:
        with anyio.fail_after(patient(10)):
            note = await chat2.wait_message("could not be finished after the restart")
            outcome = await chat2.wait_finished(card.id)
        await call(host2, "echo", {"message": "still alive"})  # the bridge itself keeps working
        with anyio.fail_after(patient(10)):
            await chat2.wait_message("There is no server named 'forms'")
    assert "no server named 'forms'" in note
    assert outcome.status is Status.CANCELLED
    assert await second.pending_calls() == [] and await second.open_interactions() == []
    await second.aclose()


async def test_a_completion_notice_before_done_accepts_the_url_card() -> None:
    server = MCPServer("early")

    @server.tool()
    async def link(ctx: Context) -> str:
        async def complete_soon() -> None:
            await ctx.session.send_elicit_complete("flow-1")

        async with anyio.create_task_group() as tg:
            tg.start_soon(complete_soon)
            result = await ctx.session.elicit_url("Sign in", "https://example.com/sign-in", "flow-1",
                                                  related_request_id=ctx.request_id)
        return str(result.action)

    host, chat = await host_for(config_for({"early": server}, server_protocol="legacy"))
    async with host:
        await host.handle_message(MessageIn(ROOM, ALICE, "call early link", explicit_command=True))
        with anyio.fail_after(patient(10)):
            card = await chat.wait_card("url")
            outcome = await chat.wait_finished(card.id)
            result = await chat.wait_message("early.link:")
    assert outcome.status is Status.ACCEPTED and outcome.reason == "the server reports the link flow complete"
    assert result == "early.link:\naccept"
