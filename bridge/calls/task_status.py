"""What a task's status card says, and when it changes: pure.

A status card shows the server's status message as it changes and the time since the task began. One edit per change
of (status, message): the elapsed time is brought up to date with each change, not ticked on its own, so a long quiet
task costs no chat API calls.
"""

from __future__ import annotations

from dataclasses import dataclass

from bridge.text.durations import time_left
from bridge.text.plain import shorten

TERMINAL = frozenset({"completed", "failed", "cancelled"})


@dataclass(frozen=True, slots=True)
class Seen:
    """A task's state as last shown."""

    status: str
    message: str


def changed(before: Seen | None, status: str, message: str | None) -> bool:
    return before is None or before != Seen(status, message or "")


def card_text(status: str, message: str | None, elapsed: float, waiting_for: str = "") -> str:
    """The status card's line for a task in `status`, `elapsed` seconds after it began."""
    said = shorten(" ".join((message or "").split()), 300)
    took = time_left(elapsed)
    if status == "input_required":
        who = waiting_for or "an answer"
        return f"task waiting for {who}" + (f": {said}" if said else "") + f" · {took}"
    if status == "completed":
        return f"task completed · {took}"
    if status in ("failed", "cancelled"):
        return f"task {status}" + (f": {said}" if said else "") + f" · {took}"
    return f"task {status}" + (f": {said}" if said else "") + f" · {took}"


def poll_seconds(poll_interval_ms: int | None, floor: float) -> float:
    """How long to wait before the next `tasks/get`: the server's `pollInterval`, never less than the floor."""
    asked = poll_interval_ms / 1000 if poll_interval_ms is not None and poll_interval_ms > 0 else floor
    return max(floor, asked)
