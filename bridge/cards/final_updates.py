"""Cards brought to their final state off the path to the server: once a waited-on card's decision is durable its
outcome goes back at once, and its card's final update (`Ending.show_end`: the chat edit, then `mark_shown`) is
queued for a few long-lived workers in the broker's task group. A queue and not a task per card: no task is started
per decision; a few workers and not one: a platform call that hangs (bounded by `CLEANUP_TIMEOUT`) does not hold back
every other card. One job per card (the notice that a decision came too late, or the card's finish), so a card's
updates stay in order. At shutdown each worker finishes what is queued (shielded, within `CLEANUP_TIMEOUT`); what is
left then was not marked shown, and whoever takes the work over shows it. With no worker running (the broker not
started, or stopped) a final update runs in the caller, as it always could."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable

import anyio
from anyio.abc import TaskStatus

from bridge.cards.held import Waiter
from bridge.door.model import Outcome
from bridge.door.ports import CLEANUP_TIMEOUT

logger = logging.getLogger(__name__)

WORKERS = 4
"""Final updates running at once (each worker one at a time)."""

ShowEnd = Callable[[Waiter, Outcome], Awaitable[None]]


class FinalUpdates:
    def __init__(self, show: ShowEnd) -> None:
        self._show = show
        self._queue: deque[tuple[Waiter, Outcome]] = deque()
        self._idle: list[anyio.Event] = []
        """One event per worker waiting for work (made only while it waits)."""
        self._workers = 0
        self._busy = 0
        self._settled: anyio.Event | None = None
        """Made only while someone waits for the queue to empty (`settled`)."""

    async def show(self, waiter: Waiter, final: Outcome) -> None:
        """Bring `waiter`'s card to `final` soon (queued; at once in this task when no worker runs). Never raises
        for the platform: a failure is logged."""
        if not self._workers:
            await self._show(waiter, final)
            return
        self._queue.append((waiter, final))
        if self._idle:
            self._idle.pop().set()

    async def settled(self) -> None:
        """Wait until every final update asked for so far is done (shutdown: while the chat adapters still serve)."""
        while self._workers and (self._busy or self._queue):
            if self._settled is None:
                self._settled = anyio.Event()
            await self._settled.wait()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """One worker, until cancelled; then it finishes what is queued (bounded)."""
        self._workers += 1
        task_status.started()
        try:
            while True:
                while self._queue:
                    await self._one(*self._queue.popleft())
                wake = anyio.Event()
                self._idle.append(wake)
                try:
                    await wake.wait()
                finally:
                    if wake in self._idle:
                        self._idle.remove(wake)
        finally:
            # Shutdown: no card left with live buttons if it can be helped. Between the queue found empty and the
            # count going down there is no await, so a final update asked for after that runs in its caller.
            try:
                with anyio.move_on_after(CLEANUP_TIMEOUT, shield=True):
                    while self._queue:
                        await self._one(*self._queue.popleft())
            finally:
                self._workers -= 1
                if not self._workers:
                    if self._queue:
                        logger.warning("%d card(s) left without their final state; shown after the restart",
                                       len(self._queue))
                        self._queue.clear()
                    if self._settled is not None:
                        self._settled.set()
                        self._settled = None

    async def _one(self, waiter: Waiter, final: Outcome) -> None:
        self._busy += 1
        try:
            await self._show(waiter, final)
        except Exception:
            # The top of a broker task: one card failing must not stop the others' final updates.
            logger.exception("bringing card %s to its final state failed", waiter.interaction.id)
        finally:
            self._busy -= 1
            if self._settled is not None and not (self._busy or self._queue):
                self._settled.set()
                self._settled = None
