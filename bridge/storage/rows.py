"""The rows the store hands out: values, no I/O (`AuditRow`, `PendingCall`, `StoredInteraction`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bridge.model import Actor, CardRef, ConversationKey, Interaction, Outcome, Status


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
    """This row's link in the hash chain (`bridge.audit`)."""


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
    """When this round was stored: interactions of this round were created at or after it."""


@dataclass(frozen=True, slots=True)
class StoredInteraction:
    interaction: Interaction
    status: Status
    card: CardRef | None
    pending_call: str | None
    input_key: str | None
    outcome: Outcome | None


@dataclass(frozen=True, slots=True)
class RunningCall:
    """A tool call that was running when it was recorded."""

    id: str
    conversation: str
    """The conversation's id as stored (`ConversationKey.id()`)."""
    server: str
    tool: str
    started_at: float
