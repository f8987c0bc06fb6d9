"""The rows the store hands out: values, no I/O (`AuditRow`, `PendingCall`, `StoredInteraction`, `RunningCall`,
`SigninRow`), and `Unreadable` for a row that cannot be read back.

A row can be unreadable because an older version wrote it, because its JSON is damaged, or because what it describes
is no longer supported (a card whose form a newer bridge refuses to build). `read_each` reads rows one by one, so one
bad row never stops the rest: the restart (or a worker's take-over) closes, audits and reports each unreadable one in
its conversation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from bridge.door.model import Actor, CardRef, ConversationKey, Interaction, MessageRef, Outcome, Status
from bridge.errors import BridgeError

logger = logging.getLogger(__name__)

T = TypeVar("T")
UNREADABLE = "unreadable"
SigninStatus = Literal["pending", "returned", "exchanging", "signed_in", "failed"]


@dataclass(frozen=True, slots=True)
class AuditRow:
    at: float
    interaction_id: str
    kind: str
    server: str
    conversation: str
    outcome: str
    actor: str | None
    actor_name: str | None
    requester: str | None
    detail: str
    id: int = 0
    hash: str = ""
    """This row's link in the hash chain (`bridge.storage.audit`)."""
    key_id: str | None = None
    """The audit key that hashed it (None: plain SHA-256)."""
    chain: int = 0
    """The hash chain it is a link of: the one its interaction's id picks (`bridge.storage.audit`)."""


@dataclass(frozen=True, slots=True)
class PendingCall:
    """A 2026-era tool call waiting for people: enough to retry it after a restart, on any worker."""

    id: str
    conversation: ConversationKey
    server: str
    tool: str
    arguments: Mapping[str, Any]
    request_state: str | None
    input_requests: Mapping[str, Any]
    """The server's `inputRequests`, as JSON (method and params), keyed as the server keyed them."""
    requester: Actor | None
    created_at: float = 0.0
    """When this round was stored: interactions of this round were created at or after it. It names the round
    (`AsyncStore.send_round`)."""
    sent_by: str | None = None
    """The process that took this round's answers to send them to the server (`AsyncStore.send_round`, or the claim
    that answered its last card: `AsyncStore.claim_parked`), if one did: once that process is gone the server may
    have run the call (it may also have died just before sending), and no result was recorded."""
    approval: str | None = None
    """What let the call run, if a person approved it: the id of the tool card they accepted, or of their standing
    grant. A call continued after a restart carries a receipt of that approval again (`bridge.calls.resume`)."""


@dataclass(frozen=True, slots=True)
class StoredInteraction:
    interaction: Interaction
    status: Status
    card: CardRef | None
    pending_call: str | None
    input_key: str | None
    outcome: Outcome | None
    parked: bool = False
    """Posted with nobody waiting on it (a parked 2026 card): the claim of the round's last answer continues the
    call (`AsyncStore.claim_parked`)."""


@dataclass(frozen=True, slots=True)
class RunningCall:
    """A tool call that was running when it was recorded."""

    id: str
    conversation: str
    """The conversation's id as stored (`ConversationKey.id()`)."""
    server: str
    tool: str
    started_at: float


@dataclass(frozen=True, slots=True)
class StoredTask:
    call_id: str
    task_id: str
    server: str
    tool: str
    conversation: ConversationKey
    requester: Actor | None
    status: str
    status_message: str
    card: MessageRef | None
    """The status card, to be edited again after a restart."""
    http_session: str
    """The HTTP session the task is bound to (empty for a stdio server)."""
    started_at: float


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


def read_each(rows: Iterable[Any], read: Callable[[Any], T],
              describe: Callable[[Any], Unreadable | None]) -> tuple[list[T], list[Unreadable]]:
    """The rows `read` can read, and an `Unreadable` (from `describe`, None to drop it) for each of the others."""
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


@dataclass(frozen=True, slots=True)
class SigninRow:
    state_hash: str
    server: str
    person: str
    worker: str
    status: SigninStatus
    expires_at: float
    code: str | None
    iss: str | None
    error: str | None
    owner_alive: bool
    """Whether the worker that started it holds a lease now (it alone can finish it)."""

    @property
    def ended(self) -> bool:
        return self.status in ("signed_in", "failed")
