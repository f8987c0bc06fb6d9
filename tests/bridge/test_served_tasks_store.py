"""Tasks run for a server, on the store: another worker answers for a task it does not run (two workers on one
Postgres store), and a task an earlier process left is ended as failed at start."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from bridge.door.model import DecisionIn, Status
from bridge.storage import open_store
from bridge.storage.served_tasks import ServedTask
from tests.bridge.test_served_tasks import call, reported
from tests.harness.hosts import ALICE, ROOM, config_for, host_for, patient
from tests.servers.task_asker import task_asker
from tests.storage.support import worker

pytestmark = pytest.mark.anyio


async def test_another_worker_answers_tasks_get_and_tasks_result_from_the_store(pg_url: str) -> None:
    config = config_for({"tasks": task_asker()}, server_protocol="legacy")
    async with worker(pg_url, "a") as store_a, worker(pg_url, "b") as store_b:
        a, chat_a = await host_for(config, store_a)
        b, chat_b = await host_for(config, store_b)
        async with a, b:
            with anyio.fail_after(patient(30)):
                await call(a, chat_a, "start_task")
                card = await chat_a.wait_card()
                task_id = (await chat_a.wait_message("tasks.start_task:")).split("\n", 1)[1].strip()
                await call(b, chat_b, "poll_task", {"task_id": task_id})
                waiting = await reported(chat_b, "poll_task")
                await b.decide(DecisionIn(card.id, ALICE, "accept", {"n": "5"}))  # the click reaches b
                await chat_a.wait_finished(card.id)
                await a.served_tasks.wait_idle()  # a sent its answer back: the task is completed
                chat_b.messages.clear()
                await call(b, chat_b, "poll_task", {"task_id": task_id})
                done = await reported(chat_b, "poll_task")
    assert a.served_tasks.polls == 0 and b.served_tasks.polls == 2  # b answered for a task only a runs
    assert waiting == {"status": "input_required", "message": "waiting for a person to answer"}
    assert (done["status"], done["message"]) == ("completed", "answered")
    assert (done["result"]["action"], done["result"]["content"]) == ("accept", {"n": 5})


async def test_another_worker_cancels_a_task_and_the_card_ends_on_the_worker_holding_it(pg_url: str) -> None:
    config = config_for({"tasks": task_asker()}, server_protocol="legacy")
    async with worker(pg_url, "a") as store_a, worker(pg_url, "b") as store_b:
        a, chat_a = await host_for(config, store_a)
        b, chat_b = await host_for(config, store_b, port=chat_a)  # one chat: either worker edits the card
        async with a, b:
            with anyio.fail_after(patient(30)):
                await call(a, chat_a, "start_task")
                card = await chat_a.wait_card()
                task_id = (await chat_a.wait_message("tasks.start_task:")).split("\n", 1)[1].strip()
                await call(b, chat_b, "cancel_task", {"task_id": task_id})
                cancelled = await reported(chat_b, "cancel_task")
                outcome = await chat_a.wait_finished(card.id)
                await a.served_tasks.wait_idle()  # a's request lets go once it hears of the claim
                row = await store_a.served_task(task_id)
    assert cancelled == {"status": "cancelled", "message": "cancelled by the server"}
    assert (outcome.status, outcome.reason) == (Status.CANCELLED, "the server cancelled its request")
    assert row is not None and row.status == "cancelled"  # a's answer (a cancel) did not overwrite it
    assert a.broker.interaction(card.id) is None


async def test_after_a_restart_a_server_asking_for_an_old_task_is_told_it_failed(tmp_path: Path) -> None:
    path = str(tmp_path / "bridge.db")
    config = replace(config_for({"tasks": task_asker()}, server_protocol="legacy"), store=path)
    store = await open_store(path)
    try:
        first, chat = await host_for(config, store)
        async with first:
            with anyio.fail_after(patient(30)):
                await call(first, chat, "start_task")
                card = await chat.wait_card()
                task_id = (await chat.wait_message("tasks.start_task:")).split("\n", 1)[1].strip()
        again, chat_again = await host_for(config, store)
        async with again:
            with anyio.fail_after(patient(30)):
                await call(again, chat_again, "poll_task", {"task_id": task_id})
                told = await reported(chat_again, "poll_task")
    finally:
        await store.aclose()
    assert chat.finished[card.id].status is Status.CANCELLED  # the card ended with the bridge, as every 2025 card
    assert (told["status"], told["message"]) == ("failed", "the bridge stopped before this was answered; ask again")
    assert told["result"]["error"]["code"] == -32600


async def test_tasks_an_earlier_process_ran_end_as_failed_at_start(tmp_path: Path) -> None:
    path = str(tmp_path / "bridge.db")
    config = replace(config_for({"tasks": task_asker()}, server_protocol="legacy"), store=path)
    store = await open_store(path)
    try:
        now = time.time()
        left = ServedTask("t-left", "tasks", "elicitation/create", ROOM.id(), "input_required", "waiting", "i-1",
                          None, None, now, now, 600000, now + 600, "")
        assert await store.create_served_task(left, 20)
        host, _ = await host_for(config, store)
        async with host:
            pass
        row = await store.served_task("t-left")
    finally:
        await store.aclose()
    assert row is not None and row.status == "failed"
    assert row.status_message == "the bridge stopped before this was answered; ask again"
