"""What the cards package needs of the store, as the roles of `bridge.storage.api` it combines."""

from __future__ import annotations

from typing import Protocol

from bridge.storage.api import AuditLog, CardStore, DecisionFeed


class ForwardingStore(CardStore, DecisionFeed, Protocol):
    """Decisions on cards another worker holds: the cards on record, and the messages forwarded between workers."""


class BrokerStore(CardStore, AuditLog, DecisionFeed, Protocol):
    """The broker: its cards on record and claimed, their audit rows, and forwarding to other workers."""
