"""Tool calls that run as tasks, against the reference server (`@modelcontextprotocol/server-everything`, whose
`simulate-research-query` runs only as a task): one status card per task, its stages as they change, the result,
the clarifying question tied to the task, and Stop (`tasks/cancel`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from bridge.config.file import ServerConfig
from bridge.door.model import DecisionIn, MessageIn, Status, StatusView
from bridge.host import Host
from bridge.llm import LLMProvider, OpenAIProvider
from bridge.safety.limits import Limits
from bridge.storage import AsyncStore, open_store
from tests.harness.hosts import ALICE, ROOM, FakeChatPort, config_for, host_store, patient
from tests.llm.fake_llm_server import FakeLLMServer, Reply, openai_completion, openai_tool_call
from tests.servers.everything_http import everything_http

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

STAGES = ("Gathering sources", "Analyzing content", "Synthesizing findings", "Generating report")


@pytest.fixture(params=["stdio", "http"])
def server(request: pytest.FixtureRequest, everything_js: Path) -> Iterator[ServerConfig]:
    """The reference server over stdio (spawned by the bridge) or streamable HTTP (running beside it)."""
    if request.param == "stdio":
        yield ServerConfig(name="everything", command="node", args=(str(everything_js), "stdio"))
        return
    with everything_http(everything_js) as url:
        yield ServerConfig(name="everything", url=url)


@asynccontextmanager
async def bridge(server: ServerConfig, llm: LLMProvider | None = None, *, limits: Limits | None = None,
                 store: AsyncStore | None = None,
                 chat: FakeChatPort | None = None) -> AsyncIterator[tuple[Host, FakeChatPort]]:
    config = config_for({"everything": server}, limits=limits or Limits())
    chat = chat or FakeChatPort()
    host = Host(config, store or await host_store(config), llm=llm)
    host.attach(chat)
    async with host:
        yield host, chat


async def say(host: Host, text: str) -> None:
    await host.handle_message(MessageIn(ROOM, ALICE, text, explicit_command=True))


def one_card(chat: FakeChatPort) -> list[StatusView]:
    assert len(chat.statuses) == 1, chat.statuses
    return next(iter(chat.statuses.values()))


async def test_a_research_task_shows_its_stages_on_one_status_card_and_its_result(server: ServerConfig) -> None:
    async with bridge(server) as (host, chat):
        with anyio.fail_after(patient(30)):
            await say(host, 'call everything simulate-research-query {"topic": "tides"}')
            report = await chat.wait_message("everything.simulate-research-query:")
    assert "# Research Report: tides" in report
    views = one_card(chat)
    texts = [v.text for v in views]
    assert texts[-1].startswith("task completed · ") and views[-1].done
    shown = [stage for stage in STAGES if any(stage in t for t in texts)]
    assert len(shown) >= 3, texts  # polled once a second, as the server asks: a stage of about 1 s each
    assert len(texts) == len(set(texts)), texts  # one edit per change, never the same line twice
    assert all(v.stoppable for v in views[:-1])


async def test_an_ambiguous_query_asks_on_a_card_tied_to_the_task_and_completes_with_the_answer(
        server: ServerConfig) -> None:
    async with bridge(server) as (host, chat):
        with anyio.fail_after(patient(30)):
            await say(host, 'call everything simulate-research-query {"topic": "python", "ambiguous": true}')
            card = await chat.wait_card("form")
            waiting = await chat.wait_for(lambda: next(
                (v for v in one_card(chat) if v.text.startswith("task waiting for ")), None))
            await host.decide(DecisionIn(card.id, ALICE, "accept", {"interpretation": "snake"}))
            report = await chat.wait_message("everything.simulate-research-query:")
    assert [d.label for d in card.details][:1] == ["Task"]
    assert card.details[0].text.startswith("simulate-research-query (task ")
    assert card.server.name == "everything"
    assert "Found multiple interpretations" in waiting.text
    assert "Clarification**: snake" in report
    assert one_card(chat)[-1].text.startswith("task completed")


async def test_stop_cancels_the_task_at_the_server_and_says_what_it_answered(server: ServerConfig) -> None:
    async with bridge(server) as (host, chat):
        with anyio.fail_after(patient(30)):
            await say(host, 'call everything simulate-research-query {"topic": "tides"}')
            first = await chat.wait_for(lambda: next(iter(chat.statuses.values()), [None])[0])
            assert await host.stop_call(first.call_id, ALICE)
            said = await chat.wait_message("Stopped everything.simulate-research-query")
    assert "the server reports the task cancelled (Client cancelled task execution.)" in said
    last = one_card(chat)[-1]
    assert last.done and last.text.startswith("task cancelled") and "stopped by" in last.text


async def test_stopping_a_task_that_waits_for_an_answer_withdraws_its_card(server: ServerConfig) -> None:
    async with bridge(server) as (host, chat):
        with anyio.fail_after(patient(30)):
            await say(host, 'call everything simulate-research-query {"topic": "python", "ambiguous": true}')
            card = await chat.wait_card("form")
            await say(host, "stop")
            said = await chat.wait_message("Stopped everything.simulate-research-query")
            outcome = await chat.wait_finished(card.id)
    assert "the server reports the task cancelled" in said
    assert outcome.status is Status.CANCELLED and outcome.reason == "the task it belongs to ended"


async def test_the_agent_calls_a_task_tool_and_answers_with_its_result(server: ServerConfig,
                                                                       llm: FakeLLMServer) -> None:
    llm.reply(
        Reply(body=openai_completion(None, finish_reason="tool_calls", tool_calls=[
            openai_tool_call("c1", "everything__simulate-research-query", '{"topic": "tides"}')])),
        Reply(body=openai_completion("The report on tides is in.")))
    model = OpenAIProvider("gpt-test", "sk-test-key", base_url=f"{llm.url}/v1", timeout=5, max_retries=0)
    async with bridge(server, model) as (host, chat):
        with anyio.fail_after(patient(30)):
            await host.handle_message(MessageIn(ROOM, ALICE, "research tides"))
            await chat.wait_message("The report on tides is in.")
    offered = {t["function"]["name"] for t in llm.requests[0].body["tools"]}
    assert "everything__simulate-research-query" in offered
    tool_message = llm.requests[1].body["messages"][-1]
    assert tool_message["role"] == "tool" and "# Research Report: tides" in tool_message["content"]
    assert one_card(chat)[-1].text.startswith("task completed")


async def test_a_conversation_runs_at_most_its_bound_of_tasks(server: ServerConfig) -> None:
    async with bridge(server, limits=Limits(tasks_per_conversation=1)) as (host, chat):
        with anyio.fail_after(patient(30)):
            await say(host, 'call everything simulate-research-query {"topic": "python", "ambiguous": true}')
            await chat.wait_card("form")  # the first task waits for its answer
            await say(host, 'call everything simulate-research-query {"topic": "tides"}')
            refused = await chat.wait_message("was not started")
            await say(host, "stop")
            await chat.wait_message("Stopped everything.simulate-research-query")
    assert refused == ("everything.simulate-research-query was not started: 1 tasks are running in this "
                       "conversation already, the most it may run at once (limits.tasks_per_conversation); stop one "
                       "or wait for one to end.")
    assert len(chat.statuses) == 1


async def test_a_task_left_by_a_clean_stop_is_picked_up_on_its_own_card_by_the_next_start(
        server: ServerConfig, tmp_path: Path) -> None:
    chat = FakeChatPort()
    store = await open_store(str(tmp_path / "bridge.db"))
    try:
        async with bridge(server, store=store, chat=chat) as (host, _):
            with anyio.fail_after(patient(30)):
                await say(host, 'call everything simulate-research-query {"topic": "tides"}')
                # Its row is stored before its card is shown: any status shown will do.
                await chat.wait_for(lambda: next(iter(chat.statuses.values()), None))
        # The host stopped while the task ran: its row stays for the next start.
        (call_id,) = chat.statuses
        async with bridge(server, store=store, chat=chat) as (host, _):
            with anyio.fail_after(patient(30)):
                told = await chat.wait_for(lambda: next(
                    (m.text for m in chat.messages
                     if "everything.simulate" in m.text and ("Research Report" in m.text or "lost" in m.text)), None))
    finally:
        await store.aclose()
    assert list(chat.statuses) == [call_id]  # the same card, edited again
    last = chat.statuses[call_id][-1]
    if server.url:  # the HTTP session the task is bound to was kept open for it
        assert "# Research Report: tides" in told
        assert last.text.startswith("task completed") and last.done
    else:  # the stdio server stopped with the bridge
        assert "the task was lost when the bridge restarted: its server runs as a process of the bridge" in told
        assert last.text.startswith("task lost when the bridge restarted") and last.done


async def test_a_task_picked_up_after_a_restart_that_needs_an_answer_says_so_and_can_be_stopped(
        everything_js: Path, tmp_path: Path) -> None:
    chat = FakeChatPort()
    store = await open_store(str(tmp_path / "bridge.db"))
    try:
        with everything_http(everything_js) as url:
            server = ServerConfig(name="everything", url=url)
            async with bridge(server, store=store, chat=chat) as (host, _):
                with anyio.fail_after(patient(30)):
                    await say(host, 'call everything simulate-research-query {"topic": "python", "ambiguous": true}')
                    await chat.wait_card("form")
            async with bridge(server, store=store, chat=chat) as (host, _):
                with anyio.fail_after(patient(30)):
                    told = await chat.wait_message("needs an answer, which cannot be asked for a task picked up")
                    await say(host, "stop")
                    said = await chat.wait_message("Stopped everything.simulate-research-query")
    finally:
        await store.aclose()
    assert "`stop` ends it" in told
    assert "the server reports the task cancelled (Client cancelled task execution.)" in said
    (views,) = chat.statuses.values()
    assert views[-1].text.startswith("task cancelled") and views[-1].done
