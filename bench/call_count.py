"""Python function calls during one awaited round, counted by a profile hook (`sys.setprofile`).

Counts `call` events (Python functions and coroutine steps entered; C functions are not counted) on this thread,
which runs the event loop and so every task of the round; the store's writer thread is not counted. `own` are the
calls whose code is under `bridge/` (the bridge's own, the fake chat platform in `tests/harness/hosts.py` left out: it
stands in for Slack), `all` every Python call, SDK and asyncio included.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

BRIDGE = str(Path(__file__).resolve().parents[1] / "bridge") + "/"
FAKE_PLATFORM = BRIDGE + "testing.py"

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Calls:
    own: int
    all: int


async def counted(call: Callable[[], Awaitable[T]]) -> tuple[Calls, T]:
    """Run `call()` with the hook on; what it returned, and the calls counted meanwhile."""
    own = every = 0

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal own, every
        if event != "call":
            return
        every += 1
        name = frame.f_code.co_filename
        if name.startswith(BRIDGE) and name != FAKE_PLATFORM:
            own += 1

    previous = sys.getprofile()
    sys.setprofile(hook)
    try:
        result = await call()
    finally:
        sys.setprofile(previous)
    return Calls(own, every), result
