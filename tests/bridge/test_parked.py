"""Parked 2026 waits: a form waiting for a person holds no task, no session and no server process; the decision
continues the call on a session from the pool. Legacy calls keep their session, as the protocol requires."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ElicitRequestFormParams, InputRequiredResult

from bench.common import ANSWER, SERVER, SMALL_FORM, TOOL, answer_for, bench_server, tag_of
from bridge.cli.demo.server import ask
from bridge.config.file import ServerConfig
from bridge.door.model import (
    Actor,
    CardRef,
    ConversationKey,
    DecisionIn,
    MessageIn,
    MessageRef,
    Status,
    StatusView,
    Verdict,
)
from bridge.host import Host
from bridge.safety.limits import Limits
from bridge.safety.receipts.keys import ReceiptKeys, ReceiptSettings
from bridge.safety.receipts.tokens import META_KEY as RECEIPT_KEY
from tests.harness.hosts import ALICE, ROOM, FakeChatPort, config_for, host_for, host_store, patient
from tests.servers.inline import two_forms_server

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

SCRIPT = Path(__file__).parent.parent / "servers" / "mrtr_stdio.py"


def person(conversation: ConversationKey) -> Actor:
    return Actor("test", f"U-{conversation.channel}", f"Person {conversation.channel}")


def book(conversation: ConversationKey) -> MessageIn:
    return MessageIn(conversation, person(conversation), f"call bench book {json.dumps({'tag': conversation.id()})}",
                     explicit_command=True)


def results(chat: FakeChatPort) -> dict[str, Any]:
    """Reported results by the tag the call was made with."""
    out: dict[str, Any] = {}
    for message in chat.messages:
        if message.text.startswith("bench.book:\n"):
            data = json.loads(message.text.split("\n", 1)[1])
            out[data["tag"]] = data
    return out


def all_results(chat: FakeChatPort, n: int) -> dict[str, Any] | None:
    found = results(chat)
    return found if len(found) == n else None


async def decide_all(host: Host, chat: FakeChatPort) -> None:
    for card in list(chat.cards.values()):
        tag = tag_of(card)
        result = await host.decide(DecisionIn(card.id, person(ConversationKey.from_id(tag)), "accept",
                                              answer_for(tag)))
        assert result.verdict is Verdict.CLAIMED


async def test_a_parked_form_holds_no_task_and_no_session() -> None:
    conversations = [ConversationKey("test", "W1", f"C{i}", "T1") for i in range(20)]
    host, chat = await host_for(config_for({"bench": bench_server()}, server_protocol="auto"))
    async with host:
        with anyio.fail_after(patient(10)):
            await host.resumed.wait()
        tasks_before = len(anyio.get_running_tasks())
        with anyio.fail_after(patient(30)):
            for conversation in conversations:
                await host.run_message(book(conversation))  # returns once the card is posted and the call parked
        assert len(chat.cards) == 20 and host.broker.statistics()["parked"] == 20
        assert all(not session.busy for session in host.pool.sessions())
        for session in host.pool.sessions():
            await host.pool.close(session)  # idle: nothing needs it while people think
        assert host.pool.sessions() == []
        # None left by the 20 parked calls (a start-up task may have ended meanwhile, so at most as many as before).
        assert len(anyio.get_running_tasks()) <= tasks_before
        assert len(host.calls.rounds.parked) == 20 and await host.store.running_calls() != []
        with anyio.fail_after(patient(30)):
            await decide_all(host, chat)
            done = await chat.wait_for(lambda: all_results(chat, 20))
    assert {tag: data["content"] for tag, data in done.items()} == {c.id(): answer_for(c.id()) for c in conversations}
    assert host.calls.rounds.parked == {} and await host.store.pending_calls() == []
    assert await host.store.running_calls() == []


async def test_300_parked_forms_with_max_sessions_10_all_complete() -> None:
    conversations = [ConversationKey("test", "W1", f"C{i:03d}", "T1") for i in range(300)]
    # 300 requests from one server within a minute: above the default flood bound, which is not what is tested here.
    limits = replace(Limits(), server_requests_per_minute=1000)
    host, chat = await host_for(config_for({"bench": bench_server()}, server_protocol="auto", max_sessions=10,
                                     limits=limits))
    async with host:
        for conversation in conversations:
            await host.handle_message(book(conversation))
        with anyio.fail_after(patient(120)):
            await chat.wait_for(lambda: len(chat.cards) == 300 or None)
            assert host.broker.statistics()["parked"] == 300
            assert len(host.pool.sessions()) <= 10
            await decide_all(host, chat)
            done = await chat.wait_for(lambda: all_results(chat, 300))
    assert all(done[c.id()]["content"] == answer_for(c.id()) for c in conversations)
    assert not [m.text for m in chat.messages if "session limit" in m.text]


async def test_a_stdio_server_may_exit_while_the_person_thinks() -> None:
    server = ServerConfig(name="forms", command=sys.executable, args=(str(SCRIPT),), protocol="auto")
    host, chat = await host_for(config_for({"forms": server}, idle_timeout=0.3))
    async with host:
        await host.handle_message(MessageIn(ROOM, ALICE, 'call forms book {"tag": "x"}', explicit_command=True))
        with anyio.fail_after(patient(30)):
            card = await chat.wait_card()
            [session] = host.pool.sessions()
            process = next(p for p in psutil.Process().children(recursive=True) if str(SCRIPT) in p.cmdline())
            await session.wait_closed()  # the idle reaper closed it: nothing was holding it
            await anyio.to_thread.run_sync(process.wait)
            assert not process.is_running()
            await host.decide(DecisionIn(card.id, ALICE, "accept", {"guests": 5}))
            text = await chat.wait_message("forms.book:\n")
    data = json.loads(text.split("\n", 1)[1])
    assert data["content"] == {"guests": 5} and data["pid"] != process.pid and len(chat.cards) == 1


async def test_a_legacy_call_keeps_its_session_while_its_card_waits() -> None:
    host, chat = await host_for(config_for({"bench": bench_server()}, server_protocol="legacy"))
    async with host:
        await host.handle_message(book(ROOM))
        with anyio.fail_after(patient(10)):
            card = await chat.wait_card()
            [session] = host.pool.sessions()
            assert session.busy and host.broker.statistics()["parked"] == 0
            await host.decide(DecisionIn(card.id, person(ROOM), "accept", answer_for(ROOM.id())))
            await chat.wait_for(lambda: results(chat) or None)
    assert card.form.schema == SMALL_FORM


async def test_tool_rules_that_decide_skip_the_tool_list() -> None:
    config = config_for({"bench": bench_server()}, server_protocol="auto", server_tool_rules=(("book", "never"),))
    host, chat = await host_for(config)
    async with host:
        await host.handle_message(book(ROOM))
        with anyio.fail_after(patient(10)):
            await chat.wait_card()
        [session] = host.pool.sessions()
        assert session.tools is None  # no tools/list was needed to know the call needs no approval


@pytest.mark.parametrize("order", [("a", "b"), ("b", "a")])
async def test_a_round_with_two_parked_cards_goes_on_after_the_last_answer(order: tuple[str, str]) -> None:
    host, chat = await host_for(config_for({"pair": two_forms_server()}, server_protocol="auto"))
    async with host:
        await host.run_message(MessageIn(ROOM, ALICE, "call pair pair", explicit_command=True))
        with anyio.fail_after(patient(10)):
            cards = {c.message.rstrip("?"): c for c in chat.cards.values()}
            assert set(cards) == {"a", "b"} and host.broker.statistics()["parked"] == 2
            await host.decide(DecisionIn(cards[order[0]].id, ALICE, "accept", {order[0]: "first"}))
            await chat.wait_finished(cards[order[0]].id)
            assert not [m for m in chat.messages if m.text.startswith("pair.pair:")]  # still waiting for the other
            await host.decide(DecisionIn(cards[order[1]].id, ALICE, "accept", {order[1]: "second"}))
            text = await chat.wait_message("pair.pair:\n")
    assert json.loads(text.split("\n", 1)[1]) == {order[0]: {order[0]: "first"}, order[1]: {order[1]: "second"}}


async def test_a_refused_question_withdraws_the_parked_card_of_the_same_round() -> None:
    host, chat = await host_for(config_for({"pair": two_forms_server()}, server_protocol="auto"))
    async with host:
        await host.run_message(MessageIn(ROOM, ALICE, 'call pair pair {"bad": true}', explicit_command=True))
        with anyio.fail_after(patient(10)):
            card = await chat.wait_card()
            outcome = await chat.wait_finished(card.id)
            failure = await chat.wait_message("was not continued")
    assert outcome.status is Status.CANCELLED and "ended without this answer" in outcome.reason
    assert "Unsupported requestedSchema" in failure
    assert host.calls.rounds.parked == {} and await host.store.pending_calls() == []


def progress_then_form_server() -> MCPServer:
    """Reports progress, then asks for a form (on the first round only: the continued call reports nothing more)."""
    server = MCPServer("steps")

    @server.tool()
    async def steps(ctx: Context) -> str | InputRequiredResult:
        """Warm up, then ask."""
        if not ctx.input_responses:
            await ctx.report_progress(1, 2, "warming up")
        answer = await ask(ctx, "go", ElicitRequestFormParams(
            message="Go on?", requested_schema={"type": "object", "properties": {"go": {"type": "boolean"}}}))
        if isinstance(answer, InputRequiredResult):
            return answer
        return json.dumps(answer.content)

    return server


class CountingChat(FakeChatPort):
    def __init__(self) -> None:
        super().__init__()
        self.posted_statuses = 0

    async def post_status(self, conversation: ConversationKey, status: StatusView) -> MessageRef:
        self.posted_statuses += 1
        return await super().post_status(conversation, status)


async def test_a_parked_calls_status_line_is_finished_once_the_call_continues() -> None:
    chat = CountingChat()
    host, _ = await host_for(config_for({"steps": progress_then_form_server()}, server_protocol="auto"), port=chat)
    async with host:
        await host.run_message(MessageIn(ROOM, ALICE, "call steps steps", explicit_command=True))
        with anyio.fail_after(patient(30)):
            card = await chat.wait_card()
            [call_id] = chat.statuses
            assert "waiting for answers" in chat.statuses[call_id][-1].text
            await host.decide(DecisionIn(card.id, ALICE, "accept", {"go": True}))
            await chat.wait_message("steps.steps:\n")  # the line is finished before the result is reported
    # One line for the call, edited in place: it no longer says it waits once the call has gone on and ended.
    last = chat.statuses[call_id][-1]
    assert chat.posted_statuses == 1 and last.done and last.text == "done"


def receipt_reporting_server() -> MCPServer:
    """`book` asks for the small form and reports what came back, and whether a receipt came with it."""
    server = MCPServer(SERVER)

    @server.tool()
    async def book(ctx: Context) -> str | InputRequiredResult:
        answer = await ask(ctx, "book", ElicitRequestFormParams(message="Book a table", requested_schema=SMALL_FORM))
        if isinstance(answer, InputRequiredResult):
            return answer
        return json.dumps({"content": answer.content, "receipt": RECEIPT_KEY in (answer.meta or {})})

    return server


@pytest.mark.parametrize("receipts", [False, True], ids=["no receipts", "receipts"])
async def test_a_card_answered_before_its_posting_returns_continues_its_call(receipts: bool) -> None:
    """A person may answer a parked card, and its claim be handed on, while the card's posting has not returned yet
    (its reference is being written: on Postgres a commit of its own). The answer is kept and the call continues; the
    card stops counting against the open-card bounds. With receipts the answer is recorded after an await (the
    receipt's audit row), in which the posting returns: the round still waits for it."""
    config = config_for({SERVER: receipt_reporting_server()}, server_protocol="auto",
                        **({"receipts": ReceiptSettings(ReceiptKeys.generate(), "test-bridge")} if receipts else {}))
    store = await host_store(config)
    host, chat = await host_for(config, store)
    answering = anyio.Event()
    answered = host.calls.rounds.answered

    async def tell_then_answer(*args: Any, **kwargs: Any) -> Any:
        answering.set()
        return await answered(*args, **kwargs)

    set_card = store.set_card

    async def set_card_until_answering(interaction_id: str, card: CardRef) -> None:
        await set_card(interaction_id, card)
        await answering.wait()  # the decision reaches the calls before the card's posting returns

    host.calls.rounds.answered = tell_then_answer  # type: ignore[method-assign]
    store.set_card = set_card_until_answering  # type: ignore[method-assign]
    async with host, anyio.create_task_group() as tg:
        with anyio.fail_after(patient(20)):
            tg.start_soon(host.run_message, MessageIn(ROOM, ALICE, f"call {SERVER} {TOOL}", explicit_command=True))
            card = await chat.wait_card()
            decided = await host.decide(DecisionIn(card.id, ALICE, "accept", ANSWER))
            assert decided.verdict is Verdict.CLAIMED
            reported = await chat.wait_message(f"{SERVER}.{TOOL}:")
    assert json.loads(reported.split("\n", 1)[1]) == {"content": ANSWER, "receipt": receipts}
    assert len(chat.cards) == 1  # asked once: the round went with its answer
    assert host.bounds.parked == {}
    assert host.bounds.cards.open("conversation", ROOM.id()) == 0
