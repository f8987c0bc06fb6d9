"""Two bridge workers on one Postgres store with one Matrix bot account: one sync loop across them (the leader's),
and when the leader stops, the other takes over from where it left off."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import TaskStatus

from bridge.config import Config
from tests.adapters.matrix.harness import Bridge, bridge, matrix_block, open_room, person, record_messages, register
from tests.adapters.matrix.test_e2e import in_thread
from tests.matrixhs.synapse import Synapse

pytestmark = pytest.mark.anyio


async def worker(config: Config, block: dict[str, Any], url: str, name: str, stop: anyio.Event, *,
                 task_status: TaskStatus[Bridge]) -> None:
    """One worker, in a task of its own (each runs its own task groups), until `stop`."""
    async with bridge(config, block, url, worker_id=name) as running:
        task_status.started(running)
        await stop.wait()


async def test_one_sync_loop_per_account_and_it_moves_when_its_worker_stops(
        synapse: Synapse, tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    bot = register(synapse, "bot")
    config = Config(store=pg_url)
    stop_a, stop_b = anyio.Event(), anyio.Event()
    async with person(synapse, "ada", None) as ada, anyio.create_task_group() as tg:
        a: Bridge = await tg.start(worker, config, matrix_block(synapse, bot, tmp_path / "a", e2ee="off"), pg_url,
                                   "a", stop_a)
        handled_a = record_messages(a, monkeypatch)
        b: Bridge = await tg.start(worker, config, matrix_block(synapse, bot, tmp_path / "b", e2ee="off"), pg_url,
                                   "b", stop_b)
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
