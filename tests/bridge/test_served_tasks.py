"""Tasks the bridge runs for a server (`bridge.requests.task_requests`): an elicitation sent as a task gets its task
at once, tasks/get follows the card, tasks/result gives the answer, tasks/cancel withdraws the card, and another worker
answers tasks/get for a task it does not run. The server is an SDK server over the real protocol (2025-11-25)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from bridge.config.file import SamplingPolicy
from bridge.door.model import DecisionIn, MessageIn, Status
from bridge.host import Host
from bridge.safety.limits import Limits
from tests.harness.hosts import ALICE, ROOM, FakeChatPort, config_for, host_for, patient
from tests.servers.task_asker import task_asker

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]


async def call(host: Host, chat: FakeChatPort, tool: str, arguments: dict[str, Any] | None = None) -> None:
    await host.handle_message(MessageIn(ROOM, ALICE, f"call tasks {tool} {json.dumps(arguments or {})}",
                                        explicit_command=True))


async def reported(chat: FakeChatPort, tool: str) -> dict[str, Any]:
    text = await chat.wait_message(f"tasks.{tool}:")
    return dict(json.loads(text.split("\n", 1)[1]))


@pytest.mark.parametrize(("protocol", "sampling", "declared"), [
    ("legacy", "ask", {"cancel": {}, "requests": {"elicitation": {"create": {}},
                                                  "sampling": {"createMessage": {}}}}),
    ("legacy", "deny", {"cancel": {}, "requests": {"elicitation": {"create": {}}}}),
    ("auto", "ask", None),  # 2026-07-28 has no task capability (tasks are an extension there)
])
async def test_the_task_capability_is_declared_on_2025_11_25_for_what_is_served(
        protocol: str, sampling: str, declared: dict[str, Any] | None) -> None:
    host, chat = await host_for(config_for({"tasks": task_asker()}, server_protocol=protocol,
                                           server_sampling=SamplingPolicy(approval=sampling)))  # type: ignore[arg-type]
    async with host:
        with anyio.fail_after(patient(30)):
            await call(host, chat, "capabilities")
            text = await chat.wait_message("tasks.capabilities:")
    assert json.loads(text.split("\n", 1)[1]) == declared


async def test_an_elicitation_sent_as_a_task_is_answered_after_several_polls() -> None:
    host, chat = await host_for(config_for({"tasks": task_asker()}, server_protocol="legacy"))
    async with host:
        with anyio.fail_after(patient(30)):
            await call(host, chat, "ask_task")
            card = await chat.wait_card()
            await host.served_tasks.wait_polls(3)  # the server polled while nobody had answered
            await host.decide(DecisionIn(card.id, ALICE, "accept", {"n": "7"}))
            report = await reported(chat, "ask_task")
    assert report["created"] == "working" and report["poll_interval"] == 2000 and report["ttl"] == 600000
    assert "input_required: waiting for a person to answer" in report["statuses"]
    assert report["polls"] >= 3
    assert report["final"]["status"] == "completed" and report["final"]["statusMessage"] == "answered"
    result = report["result"]
    assert (result["action"], result["content"]) == ("accept", {"n": 7})
    assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": report["final"]["taskId"]}
    assert any(d.label == "Asked as a task" for d in card.details)


async def test_a_decline_completes_the_task_with_the_decline() -> None:
    host, chat = await host_for(config_for({"tasks": task_asker()}, server_protocol="legacy"))
    async with host:
        with anyio.fail_after(patient(30)):
            await call(host, chat, "ask_task")
            card = await chat.wait_card()
            await host.served_tasks.wait_polls(1)
            await host.decide(DecisionIn(card.id, ALICE, "decline"))
            report = await reported(chat, "ask_task")
    assert report["final"]["status"] == "completed" and report["final"]["statusMessage"] == "declined by a person"
    assert report["result"]["action"] == "decline"


async def test_an_expired_card_completes_the_task_as_cancelled() -> None:
    host, chat = await host_for(config_for({"tasks": task_asker()}, server_protocol="legacy",
                                           server_elicitation_timeout=1.0))
    async with host:
        with anyio.fail_after(patient(30)):
            await call(host, chat, "ask_task")
            card = await chat.wait_card()
            report = await reported(chat, "ask_task")
    assert chat.finished[card.id].status is Status.EXPIRED
    assert report["final"]["status"] == "completed"
    assert report["final"]["statusMessage"] == "nobody answered in time"
    assert report["result"]["action"] == "cancel"


async def test_tasks_cancel_withdraws_the_card_and_a_second_cancel_is_refused() -> None:
    host, chat = await host_for(config_for({"tasks": task_asker()}, server_protocol="legacy"))
    async with host:
        with anyio.fail_after(patient(30)):
            await call(host, chat, "ask_task", {"cancel_after_polls": 2})
            card = await chat.wait_card()
            outcome = await chat.wait_finished(card.id)
            report = await reported(chat, "ask_task")
    assert outcome.status is Status.CANCELLED and outcome.reason == "the server cancelled its request"
    assert report["cancel"] == "cancelled" and report["cancel_again"] == -32602
    assert report["final"]["status"] == "cancelled"
    assert report["final"]["statusMessage"] == "cancelled by the server"
    assert report["result"]["error"]["code"] == -32600


async def test_the_ttl_bounds_the_task() -> None:
    host, chat = await host_for(config_for({"tasks": task_asker()}, server_protocol="legacy"))
    async with host:
        with anyio.fail_after(patient(30)):
            await call(host, chat, "ask_task", {"ttl_ms": 1500})
            card = await chat.wait_card()
            outcome = await chat.wait_finished(card.id)
            report = await reported(chat, "ask_task")
    assert (outcome.status, outcome.reason) == (Status.CANCELLED, "its time to live passed before it was answered")
    assert report["ttl"] == 1500
    assert report["gone"] == -32602  # and the task with it


async def test_a_server_over_its_bound_of_tasks_is_refused() -> None:
    host, chat = await host_for(config_for({"tasks": task_asker()}, server_protocol="legacy",
                                           limits=Limits(served_tasks_per_server=1)))
    async with host:
        with anyio.fail_after(patient(30)):
            await call(host, chat, "start_task")
            await chat.wait_card()
            await chat.wait_message("tasks.start_task:")
            chat.messages.clear()
            await call(host, chat, "start_task")
            refused = await chat.wait_message("start_task")
    assert "1 tasks are going for this server already" in refused
    assert len(chat.cards) == 1
