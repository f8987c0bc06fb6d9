"""Resume that never drops an accepted answer: a real stdio server on the SDK's defaults (an ephemeral request-state
key), restarted with the bridge or killed while its card waits; unreadable rows; calls interrupted by a restart."""

from __future__ import annotations

import json
import signal
import sqlite3
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
from jsonschema import Draft202012Validator
from mcp.server.mcpserver import MCPServer
from mcp.types import Completion

from bridge.config.file import ServerConfig
from bridge.door.forms import Field, FieldKind, Option, approval_form
from bridge.door.model import (
    ConversationKey,
    DecisionIn,
    Interaction,
    Kind,
    MessageIn,
    MessageRef,
    ServerLabel,
    StatusView,
    Verdict,
)
from bridge.host import Host
from bridge.requests.request_context import RequestContext, new_interaction
from bridge.storage import open_store
from bridge.storage import sqlite as sqlite_engine
from bridge.storage.driver import Step
from tests.harness.hosts import ALICE, ROOM, FakeChatPort, config_for, host_for, patient

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

SCRIPT = Path(__file__).parent.parent / "servers" / "mrtr_stdio.py"


def stdio_config(**overrides: Any) -> Any:
    server = ServerConfig(name="forms", command=sys.executable, args=(str(SCRIPT),), protocol="auto")
    return config_for({"forms": server}, **overrides)


async def call(host: Host, tool: str, arguments: dict[str, Any] | None = None) -> None:
    text = f"call forms {tool}" + (f" {json.dumps(arguments)}" if arguments else "")
    await host.handle_message(MessageIn(ROOM, ALICE, text, explicit_command=True))


async def result_of(chat: FakeChatPort, tool: str) -> dict[str, Any]:
    text = await chat.wait_message(f"forms.{tool}:\n")
    data: dict[str, Any] = json.loads(text.split("\n", 1)[1])
    return data


def server_pids() -> set[int]:
    """The stdio server processes this test process started."""
    return {p.pid for p in psutil.Process().children(recursive=True) if str(SCRIPT) in " ".join(p.cmdline())}


async def test_an_answer_given_after_a_bridge_restart_reaches_a_fresh_stdio_server(store_target: str) -> None:
    path = store_target
    first = await open_store(path)
    host, chat = await host_for(stdio_config(), first)
    async with host:
        await call(host, "book", {"tag": "t1"})
        with anyio.fail_after(patient(30)):
            card = await chat.wait_card()
        [old_pid] = server_pids()
    await first.aclose()
    assert card.id not in chat.finished  # left open for after the restart
    assert old_pid not in server_pids()  # the server process went with the bridge

    second = await open_store(path)
    host2, chat2 = await host_for(stdio_config(), second)
    async with host2:
        with anyio.fail_after(patient(30)):
            await host2.broker.wait_open(card.id)
            decided = await host2.decide(DecisionIn(card.id, ALICE, "accept", {"guests": "4"}))
            assert decided.verdict is Verdict.CLAIMED
            data = await result_of(chat2, "book")
    # The fresh process rejected the old state; the call ran again and the same question got the same answer.
    assert data["action"] == "accept" and data["content"] == {"guests": 4} and data["tag"] == "t1"
    assert data["pid"] != old_pid
    assert list(chat2.cards) == [] and not any("Invalid or expired" in m.text for m in chat2.messages)
    assert [r.outcome for r in await second.audit_rows(card.id)] == ["accepted"]
    assert await second.pending_calls() == [] and await second.running_calls() == []
    await second.aclose()


async def test_an_answer_reaches_a_fresh_process_when_the_server_was_killed_while_its_card_waited() -> None:
    host, chat = await host_for(stdio_config())
    async with host:
        await call(host, "book", {"tag": "t2"})
        with anyio.fail_after(patient(30)):
            card = await chat.wait_card()
            [pid] = server_pids()
            process = psutil.Process(pid)
            process.send_signal(signal.SIGKILL)
            await anyio.to_thread.run_sync(process.wait)
            await host.decide(DecisionIn(card.id, ALICE, "accept", {"guests": 2}))
            data = await result_of(chat, "book")
    assert data["content"] == {"guests": 2} and data["pid"] != pid
    assert len(chat.cards) == 1


async def test_every_round_s_answers_are_reused_when_the_call_runs_again(store_target: str) -> None:
    path = store_target
    first = await open_store(path)
    host, chat = await host_for(stdio_config(), first)
    async with host:
        await call(host, "two_steps")
        with anyio.fail_after(patient(30)):
            who = await chat.wait_card()
            await host.decide(DecisionIn(who.id, ALICE, "accept", {"who": "Ada"}))
            when = await chat.wait_card(index=1)
    await first.aclose()
    second = await open_store(path)
    host2, chat2 = await host_for(stdio_config(), second)
    async with host2:
        with anyio.fail_after(patient(30)):
            await host2.broker.wait_open(when.id)
            await host2.decide(DecisionIn(when.id, ALICE, "accept", {"when": "Friday"}))
            data = await result_of(chat2, "two_steps")
    assert (data["who"], data["when"]) == ("Ada", "Friday")
    assert chat2.cards == {}  # neither question was asked again
    await second.aclose()


async def test_a_question_that_changed_is_asked_again_and_the_card_says_why(store_target: str) -> None:
    path = store_target
    first = await open_store(path)
    host, chat = await host_for(stdio_config(), first)
    async with host:
        await call(host, "changing")
        with anyio.fail_after(patient(30)):
            card = await chat.wait_card()
    await first.aclose()
    second = await open_store(path)
    host2, chat2 = await host_for(stdio_config(), second)
    async with host2:
        with anyio.fail_after(patient(30)):
            await host2.broker.wait_open(card.id)
            await host2.decide(DecisionIn(card.id, ALICE, "accept", {"pick": "first"}))
            again = await chat2.wait_card()
            assert again.details[0].label == "Asked again" and "lost this call's state" in again.details[0].text
            await host2.decide(DecisionIn(again.id, ALICE, "accept", {"pick": "second"}))
            data = await result_of(chat2, "changing")
    assert data["content"] == {"pick": "second"}
    await second.aclose()


def _poison(conversation_ctx: RequestContext) -> Interaction:
    """A prompt-argument card; stored, its schema is made one this bridge refuses (below), as a card an older
    bridge stored may be."""
    field = Field("name", FieldKind.CHOICE, "name", required=True,
                  options=(Option("ada", "ada"), Option("grace", "grace")))
    return new_interaction(conversation_ctx, Kind.FORM, "The prompt greet needs name.", form=approval_form([field]),
                           timeout=600)


async def test_unreadable_rows_are_closed_and_reported_and_the_start_goes_on(store_target: str) -> None:
    path = store_target
    first = await open_store(path)
    host, chat = await host_for(stdio_config(), first)
    async with host:
        await call(host, "book", {"tag": "good"})
        with anyio.fail_after(patient(30)):
            good = await chat.wait_card()
    poison = _poison(RequestContext(ROOM, ServerLabel("forms"), ALICE, frozenset({ALICE.key})))
    await first.save_interaction(poison)
    # A free array: refused by this bridge's form model ("arrays are only allowed as multi-select enums").
    [(body,)] = await first.driver.fetch("SELECT body FROM interactions WHERE id = ?", (poison.id,))
    data = json.loads(body)
    data["schema"]["properties"]["name"] = {"type": "array"}
    await first.driver.transaction([
        Step("UPDATE interactions SET body = ? WHERE id = ?", (json.dumps(data), poison.id)),
        Step("INSERT INTO pending_calls (id, conversation, server, tool, arguments, request_state, input_requests,"
             " requester, created_at) VALUES ('bad', ?, 'forms', 'book', '{not json', NULL, '{}', NULL, 0)",
             (ROOM.id(),))])
    await first.aclose()

    second = await open_store(path)
    host2, chat2 = await host_for(stdio_config(), second)
    async with host2:
        with anyio.fail_after(patient(30)):
            await host2.resumed.wait()
            await host2.decide(DecisionIn(good.id, ALICE, "accept", {"guests": 3}))
            data = await result_of(chat2, "book")
    assert data["content"] == {"guests": 3}
    notes = [m.text for m in chat2.messages if "could not be restored" in m.text]
    assert len(notes) == 2 and any(poison.id in n for n in notes) and any("forms.book" in n for n in notes)
    [row] = await second.audit_rows(poison.id)
    assert row.outcome == "failed" and "arrays are only allowed" in row.detail
    assert await second.open_interactions() == [] and await second.pending_calls() == []
    await second.aclose()


async def test_a_call_is_on_record_on_disk_before_it_is_shown_running(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The running call's record is written behind (no hop to the writer for it), but committed before the status
    line that shows the call running is posted: a crash from then on is reported at the next start."""
    monkeypatch.setattr(sqlite_engine, "BEHIND", 60.0)  # not by the upkeep's timer, however slow the server
    path = tmp_path / "bridge.db"
    on_disk: list[list[str]] = []

    class Looking(FakeChatPort):
        async def post_status(self, conversation: ConversationKey, status: StatusView) -> MessageRef:
            with closing(sqlite3.connect(path)) as other:  # what a kill -9 right now would leave
                on_disk.append([row[0] for row in other.execute("SELECT tool FROM running_calls")])
            return await super().post_status(conversation, status)

    store = await open_store(path)
    server = ServerConfig(name="crashy", command=sys.executable,
                          args=(str(Path(__file__).parent.parent / "servers/crashy.py"),))
    host, chat = await host_for(config_for({"crashy": server}), store, Looking())
    try:
        async with host:
            with anyio.fail_after(patient(30)):
                await host.resumed.wait()  # the start's own writes are done: nothing else carries the record
                await host.handle_message(MessageIn(ROOM, ALICE, "call crashy hang", explicit_command=True))
                await chat.wait_for(lambda: chat.statuses or None)
    finally:
        await store.aclose()
    assert on_disk == [["hang"]]


async def test_calls_running_with_no_card_are_reported_as_interrupted_after_a_restart(store_target: str) -> None:
    path = store_target
    crashed = await open_store(path)  # what kill -9 leaves: a call recorded as running, nothing else
    await crashed.record_running_call("c0ffee000001", ROOM, "forms", "slow_report")
    await crashed.aclose()
    first = await open_store(path)
    server = ServerConfig(name="crashy", command=sys.executable,
                          args=(str(Path(__file__).parent.parent / "servers/crashy.py"),))
    host, chat = await host_for(config_for({"crashy": server}), first)
    async with host:
        with anyio.fail_after(patient(30)):
            told = await chat.wait_message("forms.slow_report was interrupted")
            await host.handle_message(MessageIn(ROOM, ALICE, "call crashy hang", explicit_command=True))
            await chat.wait_for(lambda: chat.statuses or None)  # it is running at the server
        assert [r.tool for r in await first.running_calls()] == ["hang"]
    # A graceful stop in the middle of a call keeps its record too.
    await first.aclose()
    second = await open_store(path)
    host2, chat2 = await host_for(config_for({"crashy": server}), second)
    async with host2:
        with anyio.fail_after(patient(30)):
            again = await chat2.wait_message("crashy.hang was interrupted")
    assert "run it again" in told and "run it again" in again
    assert await second.running_calls() == []
    await second.aclose()


async def test_a_prompt_argument_card_from_duplicate_completions_is_a_valid_form() -> None:
    server = MCPServer("prompts")

    @server.prompt()
    def greet(name: str) -> str:
        """Greet someone."""
        return f"Hello {name}"

    @server.completion()  # type: ignore[no-untyped-call, untyped-decorator]
    async def complete(ref: Any, argument: Any, context: Any) -> Completion:
        return Completion(values=["ada", "ada", "grace"])

    host, chat = await host_for(config_for({"prompts": server}))
    async with host:
        await host.handle_message(MessageIn(ROOM, ALICE, "prompt prompts greet", explicit_command=True))
        with anyio.fail_after(patient(10)):
            card = await chat.wait_card()
            decided = await host.decide(DecisionIn(card.id, ALICE, "accept", {"name": "grace"}))
            assert decided.verdict is Verdict.CLAIMED
            await chat.wait_message("Hello grace")
    assert [o.value for o in card.form.field("name").options] == ["ada", "grace"]
    assert Draft202012Validator(dict(card.form.schema)).is_valid({"name": "grace"})
    Draft202012Validator.check_schema(dict(card.form.schema))
    assert len(set(card.form.schema["properties"]["name"]["enum"])) == 2


def test_the_demo_server_keeps_its_state_key_across_processes() -> None:
    from bridge.cli.demo import server as demo_server

    key = "k" * 64  # what bridge.cli.demo.state gives it: MCP_CHAT_BRIDGE_DEMO_KEY or its key file
    first, second = demo_server.state_security([key]), demo_server.state_security([key])
    assert first is not None and second is not None and first.ttl > 600
    assert second.codec.unseal(first.codec.seal(b"state")) == b"state"
    assert demo_server.state_security(None) is None


@pytest.mark.parametrize("query", [
    "SELECT * FROM interactions WHERE status = 'open' ORDER BY created_at",
    "SELECT * FROM interactions WHERE pending_call = 'c' AND created_at >= 0 ORDER BY created_at",
    "SELECT * FROM audit WHERE interaction_id = 'i' ORDER BY id",
])
def test_what_a_start_reads_per_stored_call_goes_through_an_index(query: str) -> None:
    """A start reads each stored call's round and each parked card's approvals: with no index, each is a scan of the
    whole history (1 000 pending calls next to 100 000 old rows took 46 s; `bench.store_restart`, whole start)."""
    async def plan_of() -> str:
        store = await open_store(":memory:")
        try:
            return " ".join(str(row[-1]) for row in await store.driver.fetch(f"EXPLAIN QUERY PLAN {query}"))
        finally:
            await store.aclose()

    plan = anyio.run(plan_of)
    assert "USING INDEX" in plan or "USING COVERING INDEX" in plan, plan
