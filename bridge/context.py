"""Who and where a server request is for: the context every host feature needs to build a card."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from bridge.model import Actor, ConversationKey, ServerLabel

if TYPE_CHECKING:
    from bridge.broker import Broker
    from bridge.config import Config
    from bridge.store import Store


@dataclass(frozen=True, slots=True)
class RequestContext:
    """A server request (elicitation, sampling, roots) tied to the call and conversation it belongs to."""

    conversation: ConversationKey
    server: ServerLabel
    requester: Actor | None
    approvers: frozenset[str]
    """Actor keys allowed to decide: the requester(s) plus the server's configured approvers."""
    tool: str = ""
    pending_call: str | None = None
    """The stored 2026 call this request is part of (durable), or None for a legacy callback."""
    input_key: str | None = None

    def deadline(self, timeout: float) -> float:
        return time.time() + timeout


def new_id() -> str:
    """An id people can still type (`cancel 3f9a1c2e07b4`): 48 random bits, so collisions stay out of reach for
    millions of stored interactions (and the store refuses a duplicate rather than overwrite)."""
    return secrets.token_hex(6)


class Services(Protocol):
    """What host features (sampling, roots, approvals, the agent) need from the host."""

    @property
    def config(self) -> Config: ...

    @property
    def store(self) -> Store: ...

    @property
    def broker(self) -> Broker: ...

    async def say(self, conversation: ConversationKey, text: str) -> None: ...
