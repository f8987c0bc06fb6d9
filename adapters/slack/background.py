"""Background work the Slack adapter owns: it runs in a task group that `serve()` holds open.

Work that must outlive a listener or the broker's cleanup deadline (a card update rescheduled after a rate limit,
refreshing App Home tabs, a refusal told after the ack) is spawned here, so it ends with the adapter and never
with the request that started it. A failure is logged with its traceback and ends nothing else.
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

        self._tasks.start_soon(run)
        return True
