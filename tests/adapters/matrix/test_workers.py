"""Two bridge workers on one Postgres store with one Matrix bot account: one sync loop across them (the leader's),
and when the leader stops, the other takes over from where it left off; a card answers on whichever worker syncs,
whoever posted it (also a worker killed with SIGKILL, in a process of its own)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from anyio.abc import Process, TaskGroup, TaskStatus
from anyio.streams.text import TextReceiveStream

from adapters.matrix.render import ACCEPT, DECLINE
from bridge.config.file import Config
from tests.adapters.matrix.harness import (
    WAIT,
    Bridge,
    body,
    bridge,
    content,
    edit_of,
    matrix_block,
    open_room,
    part,
    person,
    record_messages,
    register,
)
from tests.adapters.matrix.test_e2e import in_thread, round_trip
from tests.adapters.matrix.worker_process import fleet_config
from tests.harness.hosts import patient
from tests.harness.synapse import RegisteredUser, Synapse

pytestmark = pytest.mark.anyio


async def worker(config: Config, block: dict[str, Any], url: str, name: str, stop: anyio.Event, *,
                 task_status: TaskStatus[Bridge]) -> None:
    """One worker, in a task of its own (each runs its own task groups), until `stop`."""
    async with bridge(config, block, url, worker_id=name) as running:
        task_status.started(running)
        await stop.wait()


async def start(tg: TaskGroup, config: Config, synapse: Synapse, bot: RegisteredUser, tmp_path: Path, url: str,
                name: str, stop: anyio.Event) -> Bridge:
    """Start worker `name` of the bot's account (its own state under `tmp_path / name`, encryption off)."""
    running: Bridge = await tg.start(worker, config, matrix_block(synapse, bot, tmp_path / name, e2ee="off"), url,
                                     name, stop)
    return running


async def test_one_sync_loop_per_account_and_it_moves_when_its_worker_stops(
        synapse: Synapse, tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    bot = register(synapse, "bot")
    config = Config(store=pg_url)
    stop_a, stop_b = anyio.Event(), anyio.Event()
    async with person(synapse, "ada", None) as ada, anyio.create_task_group() as tg:
        a = await start(tg, config, synapse, bot, tmp_path, pg_url, "a", stop_a)
        handled_a = record_messages(a, monkeypatch)
        b = await start(tg, config, synapse, bot, tmp_path, pg_url, "b", stop_b)
        handled_b = record_messages(b, monkeypatch)
        await open_room(ada, bot.user_id, encrypted=False)
        one = await ada.say("!mcp help")
        await ada.wait(in_thread(one))
        # Both workers are up and can post; only the leader (the first to start) syncs and handles events.
        assert [m.conversation.thread for m in handled_a] == [one] and handled_b == []
        stop_a.set()  # the leader stops: the other takes over the sync, from the token the leader saved
        two = await ada.say("!mcp help")
        await ada.wait(in_thread(two))
        assert [m.conversation.thread for m in handled_b] == [two]
        assert [m.conversation.thread for m in handled_a] == [one]
        stop_b.set()


# -- cards answered on whichever worker syncs --------------------------------------------------------------------

LEASE = 3.0
"""A short worker lease: a stopped or dead worker's work is taken over within seconds."""
ROOT = Path(__file__).resolve().parents[3]


@asynccontextmanager
async def process_worker(spec: dict[str, Any], log: Path) -> AsyncIterator[Process]:
    """A worker in a process of its own (`worker_process`), ready (caught up) when yielded; killed at the end if it
    still runs."""
    with log.open("w") as err:
        process = await anyio.open_process([sys.executable, "-m", "tests.adapters.matrix.worker_process",
                                            json.dumps(spec)], stdout=subprocess.PIPE, stderr=err, cwd=ROOT)
        try:
            assert process.stdout is not None
            with anyio.fail_after(patient(2 * WAIT)):
                async for line in TextReceiveStream(process.stdout):
                    if "ready" in line:
                        break
            yield process
        finally:
            if process.returncode is None:
                process.kill()
            with anyio.CancelScope(shield=True):
                await process.wait()
                await process.aclose()


def spec(synapse: Synapse, bot: RegisteredUser, tmp_path: Path, pg_url: str, name: str,
         lease: float) -> dict[str, Any]:
    return {"store": pg_url, "block": matrix_block(synapse, bot, tmp_path / name, e2ee="off"), "name": name,
            "lease": lease}


async def lease_renewed(pg_url: str, worker_id: str, lease: float) -> None:
    """Wait until a worker has beaten with its configured lease (from then on, its death is seen within it)."""
    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as conn:
        with anyio.fail_after(patient(WAIT)):
            while True:
                cur = await conn.execute("SELECT lease_until - heartbeat_at FROM workers WHERE id = %s",
                                         (worker_id,))
                row = await cur.fetchone()
                if row is not None and abs(float(row[0]) - lease) < 0.5:
                    return
                await anyio.sleep(0.2)  # a row in another process: nothing to wait on but the row itself


def final_edit(root: str, word: str, after: int) -> Callable[[int, Any], bool]:
    def check(index: int, event: Any) -> bool:
        new = content(event).get("m.new_content") or {}
        return index >= after and edit_of(root)(index, event) and word in str(new.get("body", "")).lower()
    return check


def by_bot(bot_id: str, key: str) -> Callable[[int, Any], bool]:
    return lambda i, e: getattr(e, "sender", "") == bot_id and getattr(e, "key", "") == key


@pytest.mark.parametrize("end", ["stops", "dies"])
async def test_a_2026_card_of_a_leader_that_went_away_is_answered_on_the_new_leader(
        synapse: Synapse, tmp_path: Path, pg_url: str, end: str) -> None:
    bot = register(synapse, "bot")
    stop_b = anyio.Event()
    async with person(synapse, "ada", None) as ada, anyio.create_task_group() as tg:
        async with process_worker(spec(synapse, bot, tmp_path, pg_url, "a", LEASE), tmp_path / "a.log") as a:
            await open_room(ada, bot.user_id, encrypted=False)
            await round_trip(ada)  # answered: a leads (b is not started yet)
            # b starts before the card is posted, so nothing it does at its own start knows the card.
            await tg.start(worker, fleet_config(pg_url, LEASE),
                           matrix_block(synapse, bot, tmp_path / "b", e2ee="off"), pg_url, "b", stop_b)
            await ada.say("!mcp call colours pick")
            root = await ada.wait(part("card"))
            poll = await ada.wait(part("poll", "colour"))
            await ada.wait(by_bot(bot.user_id, ACCEPT))  # the card is complete: its pill is on
            await ada.vote(poll.event_id, ["3"])  # blue: one answer per tap, as Element sends it
            if end == "dies":
                a.kill()
            else:
                a.terminate()  # a clean stop: its lease ends at once, its card stays open for b
            await a.wait()
        # b leads now, and takes a's parked call over; the card a posted answers on b.
        after = len(ada.seen)
        await ada.react(root.event_id, ACCEPT)
        result = await ada.wait(lambda i, e: i >= after and body(e).startswith("colours.pick:"))
        assert "[2026-07-28] accepted: {'colour': 'blue'}" in body(result)
        await ada.wait(final_edit(root.event_id, "accepted", after))
        stop_b.set()


async def test_a_dead_leader_s_legacy_card_is_ended_by_the_new_leader_and_later_answers_are_told_so(
        synapse: Synapse, tmp_path: Path, pg_url: str) -> None:
    bot = register(synapse, "bot")
    lease = 15.0  # long enough that an answer right after the death comes before the take-over
    stop_b = anyio.Event()
    async with person(synapse, "ada", None) as ada, anyio.create_task_group() as tg:
        async with process_worker(spec(synapse, bot, tmp_path, pg_url, "a", lease), tmp_path / "a.log") as a:
            await open_room(ada, bot.user_id, encrypted=False)
            await round_trip(ada)
            await tg.start(worker, fleet_config(pg_url, lease),
                           matrix_block(synapse, bot, tmp_path / "b", e2ee="off"), pg_url, "b", stop_b)
            await ada.say("!mcp call orders order")
            root = await ada.wait(part("card"))
            await ada.wait(part("poll", "colour"))
            await lease_renewed(pg_url, "a", lease)  # its start registers it for the default lease
            a.kill()
            await a.wait()
        # Before the take-over: a's server session is gone with it, so the answer cannot count; Ada is told why.
        after = len(ada.seen)
        await ada.react(root.event_id, ACCEPT)
        await ada.wait(lambda i, e: i >= after and "not answering" in body(e))
        # The take-over: b ends the card as failed and tells the room.
        await ada.wait(final_edit(root.event_id, "failed", after))
        await ada.wait(lambda i, e: i >= after and "The bridge stopped while orders.order waited here" in body(e))
        # A later answer gets the usual notice, never silence.
        later = len(ada.seen)
        await ada.react(root.event_id, DECLINE)
        notice = await ada.wait(lambda i, e: i >= later and "already ended (failed)" in body(e))
        assert content(notice)["m.mentions"] == {"user_ids": [ada.user_id]}
        stop_b.set()


@pytest.mark.parametrize("how", ["vote", "thread"])
async def test_a_card_a_worker_posts_while_another_leads_is_answered_through_the_leader(
        synapse: Synapse, tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    bot = register(synapse, "bot")
    config = fleet_config(pg_url, LEASE)
    stop_a, stop_b = anyio.Event(), anyio.Event()
    async with person(synapse, "ada", None) as ada, anyio.create_task_group() as tg:
        a = await start(tg, config, synapse, bot, tmp_path, pg_url, "a", stop_a)
        handled_a = record_messages(a, monkeypatch)
        b = await start(tg, config, synapse, bot, tmp_path, pg_url, "b", stop_b)
        await open_room(ada, bot.user_id, encrypted=False)
        await round_trip(ada)
        # A call that goes on on b while a leads (as one does on the worker that expired the last card of its
        # round): b posts its card.
        await b.host.handle_message(dataclasses.replace(handled_a[0], text="call colours pick"))
        root = await ada.wait(part("card"))
        poll = await ada.wait(part("poll", "colour"))
        await ada.wait(by_bot(bot.user_id, ACCEPT))
        assert a.adapter.cards.cards() == []  # a did not post it
        if how == "vote":
            await ada.vote(poll.event_id, ["2"])  # green
            await ada.react(root.event_id, ACCEPT)
            result = await ada.wait(lambda i, e: body(e).startswith("colours.pick:"))
            assert "[2026-07-28] accepted: {'colour': 'green'}" in body(result)
            await ada.wait(final_edit(root.event_id, "accepted", 0))
        else:
            # Said in the card's thread, as Element does: the thread relation and the reply fallback to the latest
            # event there (the card's poll).
            await ada.say("!decline", thread=handled_a[0].conversation.thread, latest=poll.event_id)
            result = await ada.wait(lambda i, e: body(e).startswith("colours.pick:"))
            assert "[2026-07-28] declined" in body(result)
            await ada.wait(final_edit(root.event_id, "declined", 0))
        stop_a.set()
        stop_b.set()
