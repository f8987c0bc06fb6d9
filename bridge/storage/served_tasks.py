"""The store's rows for tasks the bridge runs for a server (MCP tasks, 2025-11-25): a server sent an elicitation or
sampling request as a task, got the task's id at once, and asks `tasks/get` / `tasks/result` / `tasks/cancel` later.

A row is the task's state as the protocol shows it (status, status message, the result or the error once it ended),
its card (`interaction_id`, while one is open), its server (a server reads only its own tasks) and its retention
(`expires_at`, from the TTL). Any worker answers `tasks/get` from the row, whichever worker runs the task. Every change
after the first is one conditional update that leaves an ended task as it is, so a server's cancel and a person's
answer racing on two workers end it once. The rows themselves are `bridge.storage.served_task_rows`'.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

TaskState = Literal["working", "input_required", "completed", "failed", "cancelled"]
ENDED: tuple[TaskState, ...] = ("completed", "failed", "cancelled")


@dataclass(frozen=True, slots=True)
class ServedTask:
    id: str
    server: str
    kind: str
    """The request's method: `elicitation/create` or `sampling/createMessage`."""
    conversation: str
    status: TaskState
    status_message: str
    interaction_id: str | None
    """The card open for it now, if any."""
    result: str | None
    """The request's result as JSON, once completed."""
    error: str | None
    """The JSON-RPC error (code, message) as JSON, once failed."""
    created_at: float
    updated_at: float
    ttl_ms: int
    """How long the task is kept from its creation (the server's TTL, within the bridge's bound)."""
    expires_at: float
    """When the row may be dropped (created + TTL); it is gone for the server after that."""
    worker: str

    @property
    def ended(self) -> bool:
        return self.status in ENDED

    def gone(self, now: float) -> bool:
        return self.expires_at <= now


class ServedTaskStore(Protocol):
    """What `bridge.requests.task_requests` needs of the store (part of `AsyncStore`)."""

    async def create_served_task(self, task: ServedTask, most: int) -> bool: ...
    async def served_task(self, task_id: str) -> ServedTask | None: ...
    async def update_served_task(self, task_id: str, status: TaskState, message: str, *,
                                 interaction_id: str | None = None, result: str | None = None,
                                 error: str | None = None) -> bool: ...
    async def end_served_tasks(self, message: str) -> int: ...
