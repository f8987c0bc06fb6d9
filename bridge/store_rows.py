"""Rows the store hands back at a restart: each read on its own, so one bad row never stops the rest.

A row can be unreadable because an older version wrote it, because its JSON is damaged, or because what it describes
is no longer supported (a card whose form a newer bridge refuses to build). `read_each` returns the readable rows and
an `Unreadable` for each of the others, which the restart closes, audits and reports in its conversation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from bridge.errors import BridgeError

logger = logging.getLogger(__name__)

T = TypeVar("T")
UNREADABLE = "unreadable"


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A stored row that could not be read back."""

    table: str
    id: str
    conversation: str
    """The conversation's id as stored (`ConversationKey.id()`), possibly not parseable either."""
    pending_call: str | None = None
    what: str = ""
    """What the row was, as far as can be told (a server and tool name)."""
    reason: str = ""


@dataclass(frozen=True, slots=True)
class RunningCall:
    """A tool call that was running (no card needed yet, or one waiting on a server) when it was recorded."""

    id: str
    conversation: str
    server: str
    tool: str
    started_at: float


def read_each(rows: Iterable[Any], read: Callable[[Any], T],
              describe: Callable[[Any], Unreadable | None]) -> tuple[list[T], list[Unreadable]]:
    good: list[T] = []
    bad: list[Unreadable] = []
    for row in rows:
        try:
            good.append(read(row))
        except (ValueError, KeyError, TypeError, IndexError, BridgeError) as exc:
            broken = describe(row)
            logger.warning("a stored row could not be read: %s", exc)
            if broken is not None:
                bad.append(Unreadable(broken.table, broken.id, broken.conversation, broken.pending_call, broken.what,
                                      f"{type(exc).__name__}: {exc}"[:300]))
    return good, bad
