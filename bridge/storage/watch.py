"""Hearing about decisions made by other workers, and staying alive on record.

`DecisionWatch` wakes whoever waits on an interaction when any worker claims it: from the store's notifications
(Postgres LISTEN/NOTIFY), and, because a notification can be missed (the listening connection drops and reconnects),
from polling the watched ids too: often while not listening, now and then while listening. The worker that owns a
legacy call waits here, then reads the outcome from the store and answers its server. Parked cards (nobody waits on
them) cost no task: `follow` registers a callback by id, called from the one listener (or poller) of this worker.

Other rows announced on the same channel (a sign-in whose redirect reached another worker, `signin:<hash>`) are
waited for with `changed`: woken by their notification, or by every poll, to look again.

`keep_alive` heartbeats this worker's lease until cancelled.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

import anyio
from anyio.abc import TaskStatus

from bridge.errors import StoreError
from bridge.storage.api import DecisionFeed

Heard = Callable[[str], None]
T = TypeVar("T")

logger = logging.getLogger(__name__)


class DecisionWatch:
    """Run `run()` in a task group the owner holds; then `await watch.wait(interaction_id)`."""

    def __init__(self, store: DecisionFeed, *, poll: float = 1.0, poll_listening: float = 30.0,
                 reconnect: float = 1.0) -> None:
        self._store = store
        self._poll = poll
        self._poll_listening = poll_listening
        self._reconnect = reconnect
        self._waiting: dict[str, anyio.Event] = {}
        self._following: dict[str, Heard] = {}
        self._nudges: dict[str, anyio.Event] = {}
        """Keys `changed` waits on: set by their notification, and by every poll (the fallback)."""
        self._wake_poller = anyio.Event()
        self.listening = False

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._poll_loop)
            await tg.start(self._listen_loop)
            task_status.started()

    async def wait(self, interaction_id: str, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Return once `interaction_id` is no longer open in the store. (With `TaskGroup.start`: started once it is
        watched, so a decision made after that is heard.)"""
        event = self._waiting.get(interaction_id)
        if event is None:
            event = self._waiting[interaction_id] = anyio.Event()
        try:
            # It may have been decided before we started watching: look once.
            if interaction_id in await self._store.decided([interaction_id]):
                task_status.started()
                return
            task_status.started()
            await event.wait()
        finally:
            if self._waiting.get(interaction_id) is event:
                del self._waiting[interaction_id]

    def follow(self, interaction_id: str, heard: Heard) -> None:
        """Call `heard(interaction_id)` once it is no longer open in the store (without a task of its own; the poll
        also looks at it, so a decision made before this call is heard too)."""
        self._following[interaction_id] = heard
        self._wake_poller.set()

    def unfollow(self, interaction_id: str) -> None:
        self._following.pop(interaction_id, None)

    async def changed(self, key: str, look: Callable[[], Awaitable[T | None]]) -> T:
        """`look()`'s first result that is not None: looked at now, then again on each notification of `key` and
        at each poll (so a missed notification costs at most a poll's interval)."""
        while True:
            event = self._nudges.get(key)
            if event is None:
                event = self._nudges[key] = anyio.Event()
            found = await look()  # after registering: a notification from now on is not missed
            if found is not None:
                return found
            await event.wait()

    def _nudge(self, key: str) -> None:
        event = self._nudges.pop(key, None)
        if event is not None:
            event.set()

    def _fire(self, interaction_id: str) -> None:
        self._nudge(interaction_id)
        event = self._waiting.get(interaction_id)
        if event is not None:
            event.set()
        heard = self._following.pop(interaction_id, None)
        if heard is not None:
            heard(interaction_id)

    async def _listen_loop(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        started = False
        while True:
            try:
                async with self._store.decisions() as stream:
                    self.listening = True
                    if not started:
                        task_status.started()
                        started = True
                    # Anything decided while we were not listening is found by polling once now.
                    self._wake_poller.set()
                    async for interaction_id in stream:
                        self._fire(interaction_id)
            except StoreError as exc:
                logger.warning("not hearing decisions from other workers (%s); polling until reconnected", exc)
            self.listening = False
            self._wake_poller.set()
            if not started:
                task_status.started()
                started = True
            await anyio.sleep(self._reconnect)

    async def _poll_loop(self) -> None:
        while True:
            with anyio.move_on_after(self._poll_listening if self.listening else self._poll):
                await self._wake_poller.wait()
            self._wake_poller = anyio.Event()
            for key in list(self._nudges):
                self._nudge(key)
            watched = [*self._waiting, *self._following]
            if not watched:
                continue
            try:
                decided = await self._store.decided(watched)
            except StoreError as exc:
                logger.warning("could not poll for decisions: %s", exc)
                continue
            for interaction_id in decided:
                self._fire(interaction_id)


class Beats(Protocol):
    async def heartbeat(self, lease: float, *, now: float | None = None) -> None: ...


async def keep_alive(store: Beats, lease: float, *, every: float | None = None) -> None:
    """Heartbeat `lease` seconds every `every` (a third of the lease by default), until cancelled. A failed beat
    is retried at the next; the lease is long enough to miss two."""
    interval = lease / 3 if every is None else every
    while True:
        await anyio.sleep(interval)
        try:
            await store.heartbeat(lease)
        except StoreError as exc:
            logger.warning("worker heartbeat failed: %s", exc)
