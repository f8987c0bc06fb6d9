"""The broker's own tasks: what follows a parked card's decision runs in them (no task waits on a parked card), and
their results are handed on to the calls layer over one stream (`Handoff`), which it reads in its own tasks."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectSendStream

from bridge.cards.held import Handoff, RoundClaimed, Waiter

logger = logging.getLogger(__name__)


class BrokerTasks:
    def __init__(self) -> None:
        self._tg: TaskGroup | None = None
        self._handoff: MemoryObjectSendStream[Handoff] | None = None
        self._busy = 0  # the broker's own tasks running now (`start`): each may hand a call on
        self._idle = anyio.Event()

    @asynccontextmanager
    async def running(self, handoff: MemoryObjectSendStream[Handoff] | None) -> AsyncIterator[None]:
        """Hold the task group (and the hand-off stream) while the broker runs."""
        async with anyio.create_task_group() as tg:
            self._tg, self._handoff = tg, handoff
            try:
                yield
            finally:
                self._tg = self._handoff = None

    async def keep(self, fn: Callable[..., Coroutine[Any, Any, None]]) -> None:
        """Start a task that lives as long as the broker runs (a worker, started once it says so: `task_status`);
        not counted as handing a call on."""
        assert self._tg is not None, "the broker is not running"
        await self._tg.start(fn)

    def start(self, fn: Callable[[Waiter], Coroutine[Any, Any, None]], waiter: Waiter) -> None:
        if self._tg is None:
            logger.warning("parked interaction %s changed while the broker is not running", waiter.interaction.id)
        else:
            self._busy += 1
            self._tg.start_soon(self._counted, fn, waiter)

    async def _counted(self, fn: Callable[[Waiter], Coroutine[Any, Any, None]], waiter: Waiter) -> None:
        try:
            await fn(waiter)
        finally:
            self._busy -= 1
            if self._busy == 0:
                self._idle.set()
                self._idle = anyio.Event()

    async def stop_handing_on(self) -> None:
        """Shutdown: let the decisions being recorded now be handed on (their person was told they counted), then
        close the hand-off, so the calls layer can finish what it holds. What ends after this is continued after the
        restart, from the store."""
        while self._busy:
            await self._idle.wait()
        if self._handoff is not None:
            self._handoff.close()

    async def continue_elsewhere(self, pending_call: str) -> None:
        self.hand_on(RoundClaimed(pending_call))

    def hand_on(self, item: Handoff) -> None:
        if self._handoff is None:
            return
        try:
            self._handoff.send_nowait(item)  # unbounded: never blocks
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            # Stopping: the claim is durable, so the call is continued from the store after the restart.
            logger.info("stopping: %s is left for the restart", item)
