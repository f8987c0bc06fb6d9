"""The session pool: one MCP client per (conversation, server), one per server for `scope: shared`, or, for a
2026-07-28 server under `scope: auto`, a few shared by every conversation; for a `per_user` server, one per person too
(`bridge.servers.session_keys`), with that person's account.

A pooled server's sessions grow with the calls running at once, not with conversations: a use takes the pooled
session with the fewest calls open, and a new one starts only when every one has a call open and the pool has fewer
than `pool_size`. With `protocol: auto` the era is known only once a session has connected: until a server's first
session has, its uses wait for that one (a probe, started for the first conversation); the version it negotiated
decides for the sessions after it (a pooled slot when it is 2026-07-28, else that conversation's session), and every
later session that connects updates it.

Sessions start on first use, each in a task owned by the pool's task group, and close after an idle time or when
the pool is full and room is needed. A server that fails to start raises `ServerStartError` with its stderr tail; one
that dies while in use is dropped from the pool (`mark_gone`) so the next use starts it again.

No read timeout is set on MCP requests: on legacy servers a tool call stays open while a person answers a form, and
the SDK does not pause its clock for that. Deadlines for people are the broker's.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import httpx2
from anyio.abc import TaskGroup, TaskStatus
from mcp import Client, MCPError
from mcp.client.extension import advertise
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.types import Implementation

from bridge import __version__
from bridge.config.file import Config, ServerConfig
from bridge.config.policy import server_allowed
from bridge.door.model import Actor, ConversationKey, shown_conversation
from bridge.errors import AuthError, ServerStartError, ServerUnavailable
from bridge.observe import hooks as observe
from bridge.servers import apps_extension, catalog
from bridge.servers.mcp_session import Callbacks, Session, SessionState
from bridge.servers.message_bound import MessageBound
from bridge.servers.prestart import Prestarts
from bridge.servers.session_keys import (
    POOL,
    SHARED,
    SessionKey,
    auth_failure,
    follows_era,
    personal,
    pinned_era,
    pool_key,
    pooled,
    session_key,
)
from bridge.servers.task_client import TaskServingClient
from bridge.servers.transports import client_mode, open_transport

logger = logging.getLogger(__name__)

CLIENT_INFO = Implementation(name="mcp-chat-bridge", version=__version__)


CallbackFactory = Callable[[Session], Callbacks]
AuthFactory = Callable[[Session], httpx2.Auth | None]
"""The HTTP auth (OAuth) for a url server's session, or None to send only its configured headers."""


class SessionPool:
    """Owns every MCP client of the bridge. Use as `async with SessionPool(...) as pool:`."""

    def __init__(self, config: Config, callbacks: CallbackFactory | None = None, *, auth: AuthFactory | None = None,
                 prestarts: Prestarts | None = None) -> None:
        """`auth`: from whoever owns the sign-in; without it, url servers get only their headers. `prestarts`: stdio
        servers `run` started ahead of need; a new session adopts its server's process (bridge.servers.prestart)."""
        self._config = config
        self.callbacks: CallbackFactory = callbacks or (lambda session: Callbacks())
        """The client-side handlers each new session gets (the composition root sets the bridge's handler table)."""
        self._auth = auth
        self._sessions: dict[SessionKey, Session] = {}
        self._by_client: dict[int, tuple[object, Session]] = {}
        """Each running session by its MCP client session's id (held with it), for `by_client`."""
        self._locks: dict[SessionKey, anyio.Lock] = {}
        self._eras: dict[str, bool] = {}
        """Whether each `scope: auto` server spoke 2026-07-28 when a session of it last connected."""
        self._probes: dict[str, anyio.Lock] = {}
        """Held while a server of unknown era starts its first session: the others wait to learn where they go."""
        self._room_waiters: deque[anyio.Event] = deque()
        """Who waits for room, first come first served: each session that stops being busy or closes wakes one."""
        self._starting = 0
        self._tg: TaskGroup | None = None
        self._exit: AsyncExitStack | None = None
        self._prestarts = prestarts

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
        if follows_era(cfg) and self._era(cfg):
            return min(self._pooled(server), key=lambda s: (s.load, s.slot), default=None)
        return self._sessions.get(session_key(cfg, conversation, person))

    def _era(self, cfg: ServerConfig) -> bool | None:
        pinned = pinned_era(cfg)
        return pinned if pinned is not None else self._eras.get(cfg.name)

    def _pooled(self, server: str) -> list[Session]:
        return [s for s in self._sessions.values()
                if s.slot is not None and s.server.name == server and s.state is SessionState.READY]

    def by_client(self, client_session: object) -> Session | None:
        """The session whose MCP client session this is (for a server request the SDK hands over): asked for every
        legacy server request, so a lookup rather than a walk through every session of the bridge."""
        entry = self._by_client.get(id(client_session))
        if entry is None or entry[0] is not client_session:
            return None
        session = entry[1]
        return session if self._sessions.get(session.key) is session else None

    async def list_tools(self, conversation: ConversationKey, server: str, *, person: Actor | None = None,
                         fresh: bool = False) -> list[Any]:
        """Every tool of a server (all pages), fetched once per session (again when `fresh`)."""
        session = await self.get(conversation, server, person)
        assert session.client is not None
        if session.tools is None or fresh:
            session.tools = {t.name: t for t in await catalog.all_tools(session.client)}
        return list(session.tools.values())

    async def tool(self, session: Session, name: str) -> Any:
        """One of the session's tools by name (an `mcp.types.Tool`, or None), from the list fetched on first need;
        fetched again once when the name is not in it (a tool added since must not slip past approval rules)."""
        if session.tools is None or name not in session.tools:
            assert session.client is not None
            session.tools = {t.name: t for t in await catalog.all_tools(session.client)}
        return session.tools.get(name)

    async def get(self, conversation: ConversationKey, server: str, person: Actor | None = None, *,
                  wait: float = 0.0) -> Session:
        """The ready session for this conversation, server and (for a `per_user` server) person, started if needed.

        When the pool is full of busy sessions, wait up to `wait` seconds for one to become idle or close (a call
        continued after a decision waits as long as it takes: `max_sessions` bounds running calls).

        Raises:
            ServerUnavailable: no such server, it is disabled, or the pool stayed full of busy sessions.
            ServerStartError: it could not be started; the message carries its stderr tail.
            AuthError: a `per_user` server and no known person, or its sign-in did not happen.
        """
        cfg = self._config.servers.get(server)
        if cfg is None:
            raise ServerUnavailable(f"There is no server named {server!r}. Try `servers`.")
        if cfg.disabled:
            raise ServerUnavailable(f"The server {server!r} is disabled in the config.")
        if self._config.channels and not server_allowed(self._config, conversation, server):  # most have none
            raise ServerUnavailable(f"The server {server!r} is not available in this channel.")
        if follows_era(cfg):
            modern = self._era(cfg)
            if modern is None:
                probe = self._probes.setdefault(server, anyio.Lock())
                async with probe:
                    modern = self._era(cfg)
                    if modern is None:  # still unknown: this use's session tells (see _start)
                        return await self._get(session_key(cfg, conversation, person), cfg, conversation, person,
                                               wait)
            if modern:
                return await self._from_pool(cfg, conversation, wait)
        return await self._get(session_key(cfg, conversation, person), cfg, conversation, person, wait)

    async def _from_pool(self, cfg: ServerConfig, conversation: ConversationKey, wait: float) -> Session:
        """The pooled session with the fewest calls open; a new one when all have some and there is a free slot."""
        size = cfg.pool_size or self._config.pool_size
        # `min(self._pooled(cfg.name), key=lambda s: (s.load, s.slot))` in one pass without a call per session: asked
        # for every 2026 call and every continued one.
        best: Session | None = None
        least = (0, 0)
        for s in self._sessions.values():
            if s.slot is not None and s.server.name == cfg.name and s.state is SessionState.READY:
                load = (len(s.calls) + s.borrowed, s.slot)
                if best is None or load < least:
                    best, least = s, load
        free: int | None = None
        if best is None or least[0] != 0:  # an idle one is taken whatever slots are free: the usual case
            taken = {s.slot for s in self._sessions.values() if s.slot is not None and s.server.name == cfg.name}
            free = next((n for n in range(size) if n not in taken), None)
        if best is not None and (least[0] == 0 or free is None):
            best.last_used = time.monotonic()
            best.last_conversation = conversation
            return best
        # Starts of one slot queue on its lock: a burst of uses grows the pool by one session at a time.
        return await self._get(pool_key(cfg.name, free if free is not None else 0), cfg, conversation, None, wait)

    async def _get(self, key: SessionKey, cfg: ServerConfig, conversation: ConversationKey, person: Actor | None,
                   wait: float) -> Session:
        session = self._sessions.get(key)
        if session is not None and session.state is SessionState.READY:
            session.last_used = time.monotonic()
            session.last_conversation = conversation
            return session
        lock = self._locks.setdefault(key, anyio.Lock())
        try:
            async with lock:
                return await self._start(key, cfg, conversation, person, wait)
        finally:
            if not lock.locked():  # nobody else holds or was handed it: one lock per conversation would pile up
                self._locks.pop(key, None)

    async def _start(self, key: SessionKey, cfg: ServerConfig, conversation: ConversationKey,
                     person: Actor | None, wait: float) -> Session:
        server = cfg.name
        session = self._sessions.get(key)
        if session is not None and session.state is SessionState.READY:
            session.last_conversation = conversation
            return session  # started by whoever held the lock before us
        await self._make_room(wait)
        slot = int(key[0].removeprefix(POOL)) if pooled(key) else None
        session = Session(cfg, None if cfg.scope == "shared" or slot is not None else conversation,
                          person if personal(cfg) else None, conversation, slot=slot)
        assert self._tg is not None
        self._starting += 1  # counted against max_sessions while it starts
        try:
            await self._tg.start(self._run, session)
        except (ServerStartError, AuthError):
            raise
        except Exception as exc:
            raise ServerStartError(server, f"{server} failed to start: {_describe(exc)}",
                                   session.stderr_tail()) from exc
        finally:
            self._starting -= 1
        if follows_era(cfg):
            self._place(session, conversation)
            existing = self._sessions.get(session.key)
            if existing is not None and existing.state is SessionState.READY:  # its era changed under a racing start
                await self.close(session)
                return existing
        self._sessions[session.key] = session
        return session

    def _place(self, session: Session, conversation: ConversationKey) -> None:
        """Learn the server's era from what this session negotiated, and put it where that era's sessions go."""
        cfg = session.server
        self._eras[cfg.name] = session.modern
        if session.modern and session.slot is None:
            taken = {s.slot for s in self._sessions.values() if s.slot is not None and s.server.name == cfg.name}
            session.slot = next(n for n in range(len(taken) + 1) if n not in taken)
            session.conversation = None
        elif not session.modern and session.slot is not None:
            session.slot = None
            session.conversation = conversation

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
            self.released(session)

    def hold(self, session: Session) -> _Held:
        """Keep `session` busy (not closed for room or idleness) while the caller prepares to use it."""
        return _Held(self, session)

    def released(self, session: Session) -> None:
        """A call or a command stopped using `session`: it is idle from now if nothing else uses it."""
        session.last_used = time.monotonic()
        # `_roomier` after `session.busy`, written out: asked each time a call lets go of a session (a few a call),
        # where hardly ever does anyone wait for room.
        if self._room_waiters and not (session.calls or session.borrowed > 0):
            self._room_waiters.popleft().set()

    def _roomier(self) -> None:
        if self._room_waiters:
            self._room_waiters.popleft().set()

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
                client = TaskServingClient(
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
                    tasks=cb.tasks,
                    # MCP Apps: a server sends its tools' apps only to a host that says it shows them.
                    extensions=[advertise(apps_extension.EXTENSION, apps_extension.SETTINGS)]
                    if apps_extension.offered(self._config, session.server) else None,
                )
                session.client = await stack.enter_async_context(client)
                client_session = session.client.session
                self._by_client[id(client_session)] = (client_session, session)
                stack.callback(self._by_client.pop, id(client_session), None)
                if session.server.protocol == "2026-07-28" and not session.modern:
                    raise RuntimeError(f"pinned to protocol 2026-07-28, but it speaks {session.protocol_version}")
                if cb.log_level is not None and not session.modern:
                    await _set_legacy_log_level(session.client, cb.log_level)
                session.state = SessionState.READY
                started = True
                logger.info("started %s (%s) for %s", session.server.name, session.protocol_version,
                            shown_conversation(session.key[0]))
                task_status.started()
                await session._closed.wait()
        except Exception as exc:
            if not started:
                if (refused := auth_failure(exc)) is not None:
                    raise refused from exc
                observe.server_start_failed(session.server.name)
                # An answer past limits.message_size (a huge greeting) ends the transport: say that, not "closed".
                too_large = session.bound.explains(None) if session.bound is not None else None
                raise ServerStartError(session.server.name,
                                       f"{session.server.name} failed to start: {too_large or _describe(exc)}",
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
            self._roomier()

    async def _target(self, session: Session, stack: AsyncExitStack) -> Any:
        auth = self._auth(session) if self._auth is not None else None
        session.bound = MessageBound(session.server.name, self._config.limits.message_limit)
        target, session.stderr = await open_transport(session.server, stack, auth, self._prestarts, session.bound)
        return target

    async def _make_room(self, wait: float) -> None:
        with anyio.move_on_after(wait):
            while len(self._sessions) + self._starting >= self._config.max_sessions:
                idle = [s for s in self._sessions.values() if not s.busy]
                if idle:
                    await self.close(min(idle, key=lambda s: s.last_used))
                else:
                    woken = anyio.Event()
                    self._room_waiters.append(woken)
                    try:
                        await woken.wait()
                    except BaseException:
                        # Given up (timed out, cancelled): out of the queue, and a wake-up it got goes to the next.
                        if woken.is_set():
                            self._roomier()
                        else:
                            self._room_waiters.remove(woken)
                        raise
            return
        raise ServerUnavailable("The bridge is at its session limit and every session is busy; try again shortly.")

    async def _reap_idle(self) -> None:
        interval = max(1.0, min(self._config.idle_timeout / 2, 30.0))
        while True:
            await anyio.sleep(interval)
            now = time.monotonic()
            for session in list(self._sessions.values()):
                if not session.busy and now - session.last_used > self._config.idle_timeout:
                    logger.info("closing idle session %s", "/".join(filter(None, session.key)))
                    await self.close(session)


class _Held:
    """`SessionPool.hold`: a plain context manager, not a generator, since every legacy call enters one."""

    __slots__ = ("_pool", "_session")

    def __init__(self, pool: SessionPool, session: Session) -> None:
        self._pool = pool
        self._session = session

    def __enter__(self) -> Session:
        self._session.borrowed += 1
        return self._session

    def __exit__(self, *exc: object) -> None:
        self._session.borrowed -= 1
        self._pool.released(self._session)


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
