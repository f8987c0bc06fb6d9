"""The session pool: one MCP client per (conversation, server), or one per server for `scope: shared`; for a
`per_user` server, one per person too (`bridge.session_keys`), with that person's account.

Sessions start on first use, each in a task owned by the pool's task group, and close after an idle time or when
the pool is full and room is needed. A server that fails to start raises `ServerStartError` with its stderr tail; one
that dies while in use is dropped from the pool (`mark_gone`) so the next use starts it again.

No read timeout is set on MCP requests: on legacy servers a tool call stays open while a person answers a form, and
the SDK does not pause its clock for that. Deadlines for people are the broker's.
"""

from __future__ import annotations

import enum
import logging
import time
import warnings
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import IO, Any, Protocol

import anyio
import httpx2
from anyio.abc import TaskGroup, TaskStatus
from mcp import Client, MCPError
from mcp.client.session import ElicitationFnT, ListRootsFnT, LoggingFnT, MessageHandlerFnT, SamplingFnT
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.types import Implementation, SamplingCapability

from bridge import __version__, catalog, observe
from bridge.config import Config, ServerConfig
from bridge.errors import AuthError, ServerStartError, ServerUnavailable
from bridge.model import Actor, ConversationKey
from bridge.policy import server_allowed
from bridge.prestart import Prestarts
from bridge.session_keys import SHARED, SessionKey, auth_failure, personal, session_key
from bridge.transports import client_mode, open_transport

logger = logging.getLogger(__name__)

STDERR_TAIL = 2000
CLIENT_INFO = Implementation(name="mcp-chat-bridge", version=__version__)


class SessionState(enum.StrEnum):
    STARTING = "starting"
    READY = "ready"
    CLOSED = "closed"
    GONE = "gone"


class CallInfo(Protocol):
    """A tool call in flight on a session (`bridge.toolcalls.ToolCall`): who caused it and where, so server requests
    reach the right people."""

    @property
    def conversation(self) -> ConversationKey: ...

    @property
    def requester(self) -> Actor | None: ...

    @property
    def tool(self) -> str: ...


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


@dataclass(eq=False)
class Session:
    """One live MCP client and what the host needs to know about it."""

    server: ServerConfig
    conversation: ConversationKey | None
    """None for a shared session."""
    person: Actor | None = None  # whose account it uses: `per_user` servers only (one session per person)
    last_conversation: ConversationKey | None = None  # where a sign-in prompt for its person goes
    state: SessionState = SessionState.STARTING
    client: Client | None = None
    last_used: float = field(default_factory=time.monotonic)
    calls: dict[str, CallInfo] = field(default_factory=dict)
    stderr: IO[str] | None = None
    error: str = ""
    tools: dict[str, Any] | None = None
    """The server's tools by name, fetched on first need (for approval rules and the agent)."""
    call_lock: anyio.Lock = field(default_factory=anyio.Lock)
    """Held around each call on a legacy session: a 2025-11-25 server's request does not say which open call it
    belongs to, so with two calls open its card could reach the wrong conversation or the wrong person."""
    url_elicitations: dict[str, str] = field(default_factory=dict)
    """Legacy URL elicitation ids (the server's) -> interaction ids, for notifications/elicitation/complete."""
    borrowed: int = 0
    """Commands using the client outside a tool call (a prompt waiting on its argument card): not idle."""

    @property
    def serial(self) -> bool:
        return not self.modern

    @property
    def busy(self) -> bool:
        return bool(self.calls) or self.borrowed > 0
    _closed: anyio.Event = field(default_factory=anyio.Event)
    _finished: anyio.Event = field(default_factory=anyio.Event)

    @property
    def key(self) -> SessionKey:
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

    def context_for_request(self) -> CallInfo | None:
        """The call a legacy server request belongs to: legacy sessions run one call at a time, so the open one."""
        if not self.calls:
            return None
        return next(iter(self.calls.values()))


CallbackFactory = Callable[[Session], Callbacks]
AuthFactory = Callable[[Session], httpx2.Auth | None]
"""The HTTP auth (OAuth) for a url server's session, or None to send only its configured headers."""


class SessionPool:
    """Owns every MCP client of the bridge. Use as `async with SessionPool(...) as pool:`."""

    def __init__(self, config: Config, callbacks: CallbackFactory | None = None) -> None:
        self._config = config
        self.callbacks: CallbackFactory = callbacks or (lambda session: Callbacks())
        """The client-side handlers each new session gets (the composition root sets the bridge's handler table)."""
        self.auth: AuthFactory | None = None
        """Set by whoever owns the sign-in (the CLI today): without it, url servers get only their headers."""
        self._sessions: dict[SessionKey, Session] = {}
        self._locks: dict[SessionKey, anyio.Lock] = {}
        self._tg: TaskGroup | None = None
        self._exit: AsyncExitStack | None = None
        self.prestarts: Prestarts | None = None
        """Stdio servers `run` started ahead of need; a new session adopts its server's process (bridge.prestart)."""

    async def __aenter__(self) -> SessionPool:
        async with AsyncExitStack() as stack:
            self._tg = await stack.enter_async_context(anyio.create_task_group())
            self._tg.start_soon(self._reap_idle)
            self._exit = stack.pop_all()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
        assert self._exit is not None and self._tg is not None
        self._tg.cancel_scope.cancel()
        await self._exit.__aexit__(None, None, None)

    async def aclose(self) -> None:
        """Close every session and wait for their tasks to finish."""
        for session in list(self._sessions.values()):
            session._closed.set()
        with anyio.move_on_after(10, shield=True):
            for session in list(self._sessions.values()):
                await session._finished.wait()
        self._sessions.clear()

    def sessions(self) -> list[Session]:
        return list(self._sessions.values())

    def find(self, conversation: ConversationKey, server: str, person: Actor | None = None) -> Session | None:
        """The session this use would get, if it is running; with no person, any of a `per_user` server's here."""
        cfg = self._config.servers.get(server)
        if cfg is None:
            return None
        if personal(cfg) and (person is None or not person.user_id):
            where = SHARED if cfg.scope == "shared" else conversation.id()
            return next((s for k, s in self._sessions.items() if k[:2] == (where, server)), None)
        return self._sessions.get(session_key(cfg, conversation, person))

    def by_client(self, client_session: object) -> Session | None:
        """The session whose MCP client session this is (for a server request the SDK hands over)."""
        return next((s for s in self._sessions.values()
                     if s.client is not None and s.client.session is client_session), None)

    async def list_tools(self, conversation: ConversationKey, server: str, *, person: Actor | None = None,
                         fresh: bool = False) -> list[Any]:
        """Every tool of a server (all pages), fetched once per session (again when `fresh`)."""
        session = await self.get(conversation, server, person)
        assert session.client is not None
        if session.tools is None or fresh:
            session.tools = {t.name: t for t in await catalog.all_tools(session.client)}
        return list(session.tools.values())

    async def get(self, conversation: ConversationKey, server: str, person: Actor | None = None) -> Session:
        """The ready session for this conversation, server and (for a `per_user` server) person, started if needed.

        Raises:
            ServerUnavailable: no such server, it is disabled, or the pool is full of busy sessions.
            ServerStartError: it could not be started; the message carries its stderr tail.
            AuthError: a `per_user` server and no known person, or its sign-in did not happen.
        """
        cfg = self._config.servers.get(server)
        if cfg is None:
            raise ServerUnavailable(f"There is no server named {server!r}. Try `servers`.")
        if cfg.disabled:
            raise ServerUnavailable(f"The server {server!r} is disabled in the config.")
        if not server_allowed(self._config, conversation, server):
            raise ServerUnavailable(f"The server {server!r} is not available in this channel.")
        key = session_key(cfg, conversation, person)
        async with self._locks.setdefault(key, anyio.Lock()):
            session = self._sessions.get(key)
            if session is not None and session.state is SessionState.READY:
                session.last_used = time.monotonic()
                session.last_conversation = conversation
                return session
            await self._make_room()
            session = Session(cfg, None if cfg.scope == "shared" else conversation,
                              person if personal(cfg) else None, conversation)
            assert self._tg is not None
            try:
                await self._tg.start(self._run, session)
            except (ServerStartError, AuthError):
                raise
            except Exception as exc:
                raise ServerStartError(server, f"{server} failed to start: {_describe(exc)}",
                                       session.stderr_tail()) from exc
            self._sessions[key] = session
            return session

    @asynccontextmanager
    async def borrow(self, conversation: ConversationKey, server: str,
                     person: Actor | None = None) -> AsyncIterator[Client]:
        """A ready client for work outside a tool call; the session is not closed for room or idleness meanwhile."""
        session = await self.get(conversation, server, person)
        session.borrowed += 1
        try:
            assert session.client is not None
            yield session.client
        finally:
            session.borrowed -= 1
            session.last_used = time.monotonic()

    def mark_gone(self, session: Session, reason: str) -> None:
        """Drop a session whose server died; the next use starts a new one."""
        if session.state is SessionState.GONE:
            return
        session.state = SessionState.GONE
        session.error = reason
        if self._sessions.get(session.key) is session:
            del self._sessions[session.key]
        session._closed.set()

    async def close_person(self, server: str, person: Actor) -> None:
        """Close a person's sessions with a server (they logged out: their account must not be used any more)."""
        for session in [s for k, s in self._sessions.items() if k[1:] == (server, person.key)]:
            await self.close(session)

    async def close(self, session: Session) -> None:
        if self._sessions.get(session.key) is session:
            del self._sessions[session.key]
        session._closed.set()
        with anyio.move_on_after(10, shield=True):
            await session._finished.wait()

    async def _run(self, session: Session, *, task_status: TaskStatus[None]) -> None:
        started = False
        try:
            async with AsyncExitStack() as stack:
                target = await self._target(session, stack)
                cb = self.callbacks(session)
                client = Client(
                    target,
                    mode=client_mode(session.server.protocol),
                    elicitation_callback=cb.elicitation,
                    sampling_callback=cb.sampling,
                    sampling_capabilities=cb.sampling_capabilities,
                    list_roots_callback=cb.list_roots,
                    logging_callback=cb.logging,
                    message_handler=cb.message_handler,
                    log_level=cb.log_level,
                    client_info=CLIENT_INFO,
                    cache=None,
                )
                session.client = await stack.enter_async_context(client)
                if session.server.protocol == "2026-07-28" and not session.modern:
                    raise RuntimeError(f"pinned to protocol 2026-07-28, but it speaks {session.protocol_version}")
                if cb.log_level is not None and not session.modern:
                    await _set_legacy_log_level(session.client, cb.log_level)
                session.state = SessionState.READY
                started = True
                logger.info("started %s (%s) for %s", session.server.name, session.protocol_version,
                            session.key[0])
                task_status.started()
                await session._closed.wait()
        except Exception as exc:
            if not started:
                if (refused := auth_failure(exc)) is not None:
                    raise refused from exc
                observe.server_start_failed(session.server.name)
                raise ServerStartError(session.server.name,
                                       f"{session.server.name} failed to start: {_describe(exc)}",
                                       session.stderr_tail()) from exc
            # The server died or its transport broke while closing; the host reports it where it was in use.
            logger.warning("session %s ended with an error: %s", "/".join(filter(None, session.key)), _describe(exc))
            session.error = session.error or _describe(exc)
        finally:
            if session.state is not SessionState.GONE:
                session.state = SessionState.CLOSED
            if self._sessions.get(session.key) is session:
                del self._sessions[session.key]
            if session.stderr is not None:
                session.stderr.close()
            session._finished.set()

    async def _target(self, session: Session, stack: AsyncExitStack) -> Any:
        auth = self.auth(session) if self.auth is not None else None
        target, session.stderr = await open_transport(session.server, stack, auth, self.prestarts)
        return target

    async def _make_room(self) -> None:
        if len(self._sessions) < self._config.max_sessions:
            return
        idle = sorted((s for s in self._sessions.values() if not s.busy), key=lambda s: s.last_used)
        if not idle:
            raise ServerUnavailable("The bridge is at its session limit and every session is busy; try again shortly.")
        await self.close(idle[0])

    async def _reap_idle(self) -> None:
        interval = max(1.0, min(self._config.idle_timeout / 2, 30.0))
        while True:
            await anyio.sleep(interval)
            now = time.monotonic()
            for session in list(self._sessions.values()):
                if not session.busy and now - session.last_used > self._config.idle_timeout:
                    logger.info("closing idle session %s", "/".join(filter(None, session.key)))
                    await self.close(session)


async def _set_legacy_log_level(client: Client, level: str) -> None:
    """Legacy servers send log messages at the level set by logging/setLevel (2026 ones are asked per request)."""
    if client.server_capabilities.logging is None:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)  # deprecated in 2026-07-28, still the 2025 way
        try:
            await client.set_logging_level(level)  # type: ignore[arg-type]
        except MCPError as exc:
            logger.info("%s refused logging/setLevel: %s", client.server_info, exc)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _describe(exc.exceptions[0])
    text = str(exc) or type(exc).__name__
    return text[:500]
