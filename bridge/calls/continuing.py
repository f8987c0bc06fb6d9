"""Continuing calls after their parked cards end: the broker hands each ended card on over a memory stream
(`bridge.cards.held.Handoff`), read here in tasks of this layer's own task group, so a continued call (a session
from the pool, the next round's cards, the result) never runs inside the broker.

An ended card's answer is recorded on its parked call (`Rounds.answered`); when it was the last of its round, the call
continues (`ToolCalls.continue_call`), or, when it is not held here (taken over meanwhile, or a claim made here answered
a round held by another worker), is taken up from the store (`Resumer.take_call`).
"""

from __future__ import annotations

import logging
from typing import Protocol

import anyio
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream

from bridge.calls.resume import Resumer
from bridge.calls.toolcalls import ToolCalls
from bridge.cards.held import Handoff, ParkedEnded

logger = logging.getLogger(__name__)


class ParkedBounds(Protocol):
    """The open-card bounds, told when a parked card stops counting (`bridge.requests.limiting.Bounds`)."""

    def release_parked(self, pending_call: str, input_key: str) -> None: ...


class Continuations:
    """Run with `await tg.start(continuations.run, handed)` beside the broker."""

    def __init__(self, calls: ToolCalls, resumer: Resumer, bounds: ParkedBounds) -> None:
        self._calls = calls
        self._resumer = resumer
        self._bounds = bounds
        self.finished = anyio.Event()
        """Set once the stream has ended (the broker stopped handing on) and every call taken from it has finished:
        what a stopping host waits for (`Host.drain`) before it cancels anything."""

    async def run(self, handed: MemoryObjectReceiveStream[Handoff], *,
                  task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Continue what the broker hands on (`Broker.run(handoff)`) until cancelled or the stream ends."""
        async with anyio.create_task_group() as tg:
            task_status.started()
            async for item in handed:
                tg.start_soon(self._one, item)
        self.finished.set()

    async def _one(self, item: Handoff) -> None:
        try:
            if not isinstance(item, ParkedEnded):
                await self._resumer.take_call(item.pending_call)
                return
            self._bounds.release_parked(item.pending_call, item.input_key)
            then = await self._calls.rounds.answered(item.pending_call, item.input_key, item.outcome, item.last,
                                                      item.interaction)
            if isinstance(then, str):
                await self._resumer.take_call(then)
            elif then is not None:
                await self._calls.continue_call(then, {})
        except Exception:
            # The top of a task continuing a call: one call failing after its decision must not stop the others.
            logger.exception("continuing call %s failed", item.pending_call)
