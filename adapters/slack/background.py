"""Background work the Slack adapter owns: it runs in a task group that `serve()` holds open.

Everything a listener does after its ack (deciding, looking people up, posting, opening a modal), and work that
must outlive the broker's cleanup deadline (a card update rescheduled after a rate limit, App Home refreshes, a
refusal told after the ack) is spawned here, so it ends with the adapter and never with the request that started
it, and the ack waits for none of it. A failure is logged with its traceback and ends nothing else.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import anyio
from anyio.abc import TaskGroup

logger = logging.getLogger(__name__)


class Background:
    def __init__(self) -> None:
        self._tasks: TaskGroup | None = None
        self._busy = 0
        self._idle = anyio.Event()
        self._idle.set()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Accept work while inside; leaving cancels whatever is still running."""
        async with anyio.create_task_group() as tasks:
            self._tasks = tasks
            try:
                yield
            finally:
                self._tasks = None
                tasks.cancel_scope.cancel()

    def spawn(self, what: str, work: Callable[[], Awaitable[None]]) -> bool:
        """Run `work` in the background; False when not running (the caller decides what to do instead)."""
        if self._tasks is None:
            return False

        async def run() -> None:
            try:
                await work()
            except Exception:
                logger.exception("Slack background work failed: %s", what)
            finally:
                self._busy -= 1
                if not self._busy:
                    self._idle.set()

        if not self._busy:
            self._idle = anyio.Event()
        self._busy += 1
        self._tasks.start_soon(run, name=what)
        return True

    async def idle(self) -> None:
        """Wait until no work is running (tests and benchmarks: everything a burst of events started is done)."""
        while self._busy:
            await self._idle.wait()
