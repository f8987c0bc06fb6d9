"""What the calls package needs of the store, as the roles of `bridge.storage.api` it combines."""

from __future__ import annotations

from typing import Protocol

from bridge.storage.api import (
    CardStore,
    DecisionFeed,
    Housekeeping,
    LeaseStore,
    PendingCallStore,
    RunningCallStore,
    StoreLife,
    TaskStore,
)


class RoundStore(PendingCallStore, CardStore, Protocol):
    """2026 rounds: the stored call, and the cards of its round."""


class TaskCallStore(TaskStore, RunningCallStore, StoreLife, Protocol):
    """Calls run as tasks: their rows, the running calls, and a flush before a status is shown."""


class CallStore(RoundStore, TaskCallStore, Protocol):
    """Tool calls of both eras: what rounds and task calls need, and the running calls of both."""


class ResumeStore(CardStore, PendingCallStore, RunningCallStore, LeaseStore, StoreLife, Protocol):
    """Taking over work: the lapsed workers' cards, stored calls and running calls (and which process this is: a
    round taken for sending by this one is not an interrupted one)."""


class FleetStore(Housekeeping, LeaseStore, DecisionFeed, StoreLife, Protocol):
    """A worker beside the others: leases, deadlines, retention, forwarded decisions and the store's upkeep."""
