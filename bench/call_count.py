"""Python function calls during one awaited round, counted by a profile hook (`sys.setprofile`).

Counts `call` events (Python functions and coroutine steps entered; C functions are not counted) on this thread,
which runs the event loop and so every task of the round; the store's writer thread is not counted. `own` are the
calls whose code is under `bridge/`, `all` every Python call, SDK and asyncio included.

`platform` are the calls of the stand-in for the chat platform and the person (the fake chat port of
`tests/harness/hosts.py` and the answering ports of `bench/common.py`): its own frames, and every call whose nearest
frame of known code (walking out through the callers) is one of them, such as the task it starts to click the card
and the events it sets. A real platform's work happens in Slack or Matrix, not in the bridge's process, so the
bridge's share of a round is `all` less `platform`. A call made by the bridge on the stand-in's behalf (`host.decide`,
which the adapter calls on a click) is the bridge's.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
BRIDGE = str(ROOT / "bridge") + "/"
PLATFORM = (str(ROOT / "tests" / "harness" / "hosts.py"), str(ROOT / "bench" / "common.py"))

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Calls:
    own: int
    all: int
    platform: int = 0


def _owner(frame: FrameType | None) -> str:
    """'platform', 'bridge' or '' (neither on the stack of callers: the event loop's own work)."""
    while frame is not None:
        name = frame.f_code.co_filename
        if name in PLATFORM:
            return "platform"
        if name.startswith(BRIDGE):
            return "bridge"
        frame = frame.f_back
    return ""


async def counted(call: Callable[[], Awaitable[T]]) -> tuple[Calls, T]:
    """Run `call()` with the hook on; what it returned, and the calls counted meanwhile."""
    own = every = platform = 0

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal own, every, platform
        if event != "call":
            return
        every += 1
        owner = _owner(frame)
        if owner == "platform":
            platform += 1
        elif owner == "bridge" and frame.f_code.co_filename.startswith(BRIDGE):
            own += 1

    previous = sys.getprofile()
    sys.setprofile(hook)
    try:
        result = await call()
    finally:
        sys.setprofile(previous)
    return Calls(own, every, platform), result
