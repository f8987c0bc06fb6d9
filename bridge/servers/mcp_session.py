"""One live MCP client and what the host needs to know about it: its state, the calls in flight on it (so server
requests reach the right people), its tool list, its stderr, and the client-side handlers it is given."""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from typing import IO, Any, Protocol

import anyio
from mcp import Client
from mcp.client.session import ElicitationFnT, ListRootsFnT, LoggingFnT, MessageHandlerFnT, SamplingFnT
from mcp.types import SamplingCapability

from bridge.config.file import ServerConfig
from bridge.door.model import Actor, ConversationKey
from bridge.servers.message_bound import MessageBound
from bridge.servers.session_keys import SHARED, SessionKey, pool_key
from bridge.servers.task_client import TaskHost

STDERR_TAIL = 2000


class SessionState(enum.StrEnum):
    STARTING = "starting"
    READY = "ready"
    CLOSED = "closed"
    GONE = "gone"


class CallInfo(Protocol):
    """A tool call in flight on a session (`bridge.calls.toolcalls.ToolCall`): who caused it and where, so server
    requests reach the right people."""

    @property
    def conversation(self) -> ConversationKey: ...

    @property
    def requester(self) -> Actor | None: ...

    @property
    def tool(self) -> str: ...

    @property
    def task(self) -> str:
        """The server's task id when the call runs as a task, else empty."""
        ...


RELATED_TASK = "io.modelcontextprotocol/related-task"
"""The `_meta` key that ties a server's request (an elicitation, say) to the task it belongs to."""


def related_task(meta: Any) -> str | None:
    """The task id a server request's `_meta` names, if any."""
    if not isinstance(meta, dict):
        return None
    related = meta.get(RELATED_TASK)
    task_id = related.get("taskId") if isinstance(related, dict) else None
    return task_id if isinstance(task_id, str) else None


@dataclass(frozen=True, slots=True)
class Callbacks:
    """The client-side handlers for one session. Passing one declares the capability, so only pass what we serve."""

    elicitation: ElicitationFnT | None = None
    sampling: SamplingFnT | None = None
    sampling_capabilities: SamplingCapability | None = None
    list_roots: ListRootsFnT | None = None
    logging: LoggingFnT | None = None
    message_handler: MessageHandlerFnT | None = None
    log_level: Any = None
    tasks: TaskHost | None = None
    """Runs the elicitation and sampling requests a 2025-11-25 server sends as tasks (`bridge.servers.task_client`)."""


@dataclass(eq=False)
class Session:
    """One live MCP client and what the host needs to know about it."""

    server: ServerConfig
    conversation: ConversationKey | None
    """None for a shared or pooled session."""
    person: Actor | None = None  # whose account it uses: `per_user` servers only (one session per person)
    last_conversation: ConversationKey | None = None  # where a sign-in prompt for its person goes
    state: SessionState = SessionState.STARTING
    client: Client | None = None
    last_used: float = field(default_factory=time.monotonic)
    calls: dict[str, CallInfo] = field(default_factory=dict)
    stderr: IO[str] | None = None
    bound: MessageBound | None = None
    """Its transport's `limits.message_size`, and what it refused (set when the transport opens)."""
    error: str = ""
    tools: dict[str, Any] | None = None
    """The server's tools by name, fetched on first need (for approval rules and the agent)."""
    call_lock: anyio.Lock = field(default_factory=lambda: anyio.Lock(fast_acquire=True))
    """Held around each call on a legacy session: a 2025-11-25 server's request does not say which open call it
    belongs to, so with two calls open its card could reach the wrong conversation or the wrong person."""
    url_elicitations: dict[str, str] = field(default_factory=dict)
    """Legacy URL elicitation ids (the server's) -> interaction ids, for notifications/elicitation/complete."""
    borrowed: int = 0
    """Commands using the client outside a tool call (a prompt waiting on its argument card): not idle."""
    slot: int | None = None
    """Its place in the server's pool (a 2026-07-28 server used by every conversation), or None."""

    @property
    def serial(self) -> bool:
        return not self.modern

    @property
    def busy(self) -> bool:
        return bool(self.calls) or self.borrowed > 0
    _closed: anyio.Event = field(default_factory=anyio.Event)
    _finished: anyio.Event = field(default_factory=anyio.Event)

    @property
    def load(self) -> int:
        """Calls and commands using it now: a pooled session with none is the one to hand out."""
        return len(self.calls) + self.borrowed

    @property
    def key(self) -> SessionKey:
        if self.slot is not None:
            return pool_key(self.server.name, self.slot)
        return (self.conversation.id() if self.conversation else SHARED, self.server.name,
                self.person.key if self.person else "")

    @property
    def protocol_version(self) -> str:
        return self.client.protocol_version if self.client is not None else ""

    @property
    def modern(self) -> bool:
        return self.protocol_version >= "2026-07-28"

    async def wait_closed(self) -> None:
        """Wait until this session's task has ended (closed, idle-reaped, or gone)."""
        await self._finished.wait()

    def stderr_tail(self) -> str:
        if self.stderr is None:
            return ""
        try:
            self.stderr.flush()
            self.stderr.seek(0, 2)
            size = self.stderr.tell()
            self.stderr.seek(max(0, size - STDERR_TAIL))
            return self.stderr.read().strip()
        except (OSError, ValueError):
            return ""

    def call_for_task(self, task_id: str) -> CallInfo | None:
        """The call running as the task `task_id` on this session (a request tied to it says which)."""
        return next((c for c in self.calls.values() if c.task == task_id), None)

    def context_for_request(self) -> CallInfo | None:
        """The call a legacy server request belongs to: legacy sessions run one call at a time, so the open one. A
        2026 session's requests travel with their call (`input_required`); with several calls open on it, none."""
        # A task running beside a legacy call: its own requests say which task they belong to (`call_for_task`),
        # so a request that names none is the plain call's.
        calls = [c for c in self.calls.values() if not c.task] or list(self.calls.values())
        if not calls or (len(calls) > 1 and not self.serial):
            return None
        return calls[0]
