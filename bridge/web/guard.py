"""Connection limits for the bridge's listeners: slow and idle clients are shed, and the accept loop stays quiet.

One `ConnectionGuard` per listening socket owns its accept loop and every connection it accepted. A connection is in
one of three states, and only the first two have a deadline:

- idle: open, and not one byte of the next request yet (before the first request, and between keep-alive requests):
  closed after `idle_timeout`;
- reading: part of a request has come, not all of its head and body: closed `read_timeout` after its first byte
  (a deadline for the whole request, so trickling a byte at a time does not extend it);
- busy: the request is read whole and the application is answering: no deadline here.

The counts are capped overall (`max_connections`) and per client address (`max_per_client`). At a cap, and when the
process is out of file descriptors, the oldest idle or reading connection is shed to make room, so a health probe
(which sends its request at once) is still served while hundreds of idle connections are held; only when every
connection is busy is the new one refused. The accept loop is ours rather than asyncio's `create_server`, whose loop
logs "socket.accept() out of system resource" up to `backlog` times per attempt when descriptors run out (tens of
thousands of lines a second): here it is one warning a minute.

The protocol tells the guard what happened (`opened`, `reading`, `busy`, `idle`, `closed`); the guard never reads a
byte itself, so it serves both uvicorn's h11 protocol (the bridge's HTTP server) and aiohttp's (Slack's HTTP mode).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

logger = logging.getLogger(__name__)

OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
WARN_EVERY = 60.0
"""Seconds between two warnings of the same kind (descriptors exhausted, a cap reached)."""
LISTEN_BACKLOG = 128
"""Connections the kernel holds for us while we cannot accept (out of descriptors)."""
RETRY_ACCEPT = 1.0
"""Seconds to wait for a connection to close before accepting again when nothing could be shed."""


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    idle_timeout: float = 5.0
    """Seconds a connection may stay open without sending a byte of its next request."""
    read_timeout: float = 10.0
    """Seconds from a request's first byte until its head and body are read whole."""
    max_connections: int = 256
    max_per_client: int = 64
    """Open connections from one client address (behind a reverse proxy: the proxy's)."""


class State(Enum):
    IDLE = "idle"
    READING = "reading"
    BUSY = "busy"


class _Connection:
    __slots__ = ("client", "state", "timer", "transport")

    def __init__(self, transport: asyncio.Transport, client: str) -> None:
        self.transport = transport
        self.client = client
        self.state = State.BUSY
        self.timer: asyncio.TimerHandle | None = None

    def disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


class _Warning:
    """One log line per `WARN_EVERY` seconds however often the condition recurs, with the count of the rest."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.last = -WARN_EVERY
        self.suppressed = 0

    def __call__(self, now: float, *args: object) -> None:
        if now - self.last < WARN_EVERY:
            self.suppressed += 1
            return
        more = f" ({self.suppressed} more since the last warning)" if self.suppressed else ""
        logger.warning(self.text + more, *args)
        self.last, self.suppressed = now, 0


class ConnectionGuard:
    """The connections of one listener: admission, deadlines and shedding. Run `serve` in a task."""

    def __init__(self, limits: ConnectionLimits, name: str) -> None:
        self.limits = limits
        self.name = name
        self._open: dict[asyncio.Transport, _Connection] = {}  # insertion order: oldest first
        self._per_client: dict[str, int] = {}
        self._closed = asyncio.Event()
        self._out_of_fds = _Warning(f"{name}: out of file descriptors with %d connections open; shedding idle ones "
                                    "and accepting more slowly")
        self._at_cap = _Warning(f"{name}: connection limit reached (%d open, at most %d, %d per client); shedding "
                                "idle ones")
        self.shed = 0
        """Connections closed to make room (a count for tests and figures)."""
        self.expired = 0
        """Connections closed at their idle or read deadline."""

    @property
    def open(self) -> int:
        return len(self._open)

    # -- the accept loop -----------------------------------------------------------------------------------------

    async def serve(self, sock: socket.socket, protocol: Callable[[], asyncio.BaseProtocol]) -> None:
        """Accept connections on `sock` until cancelled, each served by a new `protocol()`."""
        loop = asyncio.get_running_loop()
        sock.setblocking(False)
        try:
            while True:
                try:
                    conn, address = await loop.sock_accept(sock)
                except OSError as exc:
                    if exc.errno not in OUT_OF_RESOURCES:
                        if exc.errno in (errno.ECONNABORTED, errno.EPROTO, errno.EPERM):
                            continue  # the client gave up before we took it; Linux also reports firewall drops so
                        raise
                    self._out_of_fds(loop.time(), self.open)
                    if self._shed(None):
                        await asyncio.sleep(0)  # the shed socket's descriptor is freed on the loop's next turn
                    else:
                        await self._wait_for_close()
                    continue
                client = str(address[0]) if isinstance(address, tuple) else ""
                if not self._make_room(client, loop.time()):
                    conn.close()
                    continue
                try:
                    await loop.connect_accepted_socket(protocol, conn)
                except OSError:
                    conn.close()
        finally:
            for connection in list(self._open.values()):
                connection.disarm()

    async def _wait_for_close(self) -> None:
        self._closed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._closed.wait(), RETRY_ACCEPT)

    def _make_room(self, client: str, now: float) -> bool:
        """Whether a new connection from `client` may be served, shedding the oldest waiting one at a cap."""
        limits = self.limits
        if self._per_client.get(client, 0) >= limits.max_per_client:
            self._at_cap(now, self.open, limits.max_connections, limits.max_per_client)
            if not self._shed(client):
                return False
        if self.open >= limits.max_connections:
            self._at_cap(now, self.open, limits.max_connections, limits.max_per_client)
            if not self._shed(None):
                return False
        return True

    def _shed(self, client: str | None) -> bool:
        """Close the oldest connection that is not being answered (of `client`, or anyone's)."""
        for connection in self._open.values():
            if connection.state is not State.BUSY and (client is None or connection.client == client):
                self.shed += 1
                self._drop(connection)
                return True
        return False

    # -- what the protocol reports -------------------------------------------------------------------------------

    def opened(self, transport: asyncio.Transport) -> None:
        peer = transport.get_extra_info("peername")
        client = str(peer[0]) if isinstance(peer, tuple) else ""
        connection = _Connection(transport, client)
        self._open[transport] = connection
        self._per_client[client] = self._per_client.get(client, 0) + 1
        self._wait(connection, State.IDLE, self.limits.idle_timeout)

    def reading(self, transport: asyncio.Transport) -> None:
        """Part of a request came. The read deadline starts with its first byte and is not extended."""
        connection = self._open.get(transport)
        if connection is not None and connection.state is not State.READING:
            self._wait(connection, State.READING, self.limits.read_timeout)

    def busy(self, transport: asyncio.Transport) -> None:
        """The request is read whole; the application answers without a deadline from here."""
        connection = self._open.get(transport)
        if connection is not None:
            connection.disarm()
            connection.state = State.BUSY

    def idle(self, transport: asyncio.Transport) -> None:
        """The answer is sent; the connection waits for its next request."""
        connection = self._open.get(transport)
        if connection is not None and connection.state is not State.IDLE:
            self._wait(connection, State.IDLE, self.limits.idle_timeout)

    def closed(self, transport: asyncio.Transport) -> None:
        connection = self._open.pop(transport, None)
        if connection is not None:
            self._forget(connection)

    # -- inside --------------------------------------------------------------------------------------------------

    def _wait(self, connection: _Connection, state: State, timeout: float) -> None:
        connection.disarm()
        connection.state = state
        connection.timer = asyncio.get_running_loop().call_later(timeout, self._expire, connection)

    def _expire(self, connection: _Connection) -> None:
        connection.timer = None
        if self._open.get(connection.transport) is connection:
            self.expired += 1
            logger.debug("%s: closed a connection from %s %s too long", self.name, connection.client,
                         connection.state.value)
            self._drop(connection)

    def _drop(self, connection: _Connection) -> None:
        """Forget the connection now (so counts are right at once) and abort it: nothing of it is worth flushing."""
        del self._open[connection.transport]
        self._forget(connection)
        connection.transport.abort()

    def _forget(self, connection: _Connection) -> None:
        connection.disarm()
        left = self._per_client.get(connection.client, 1) - 1
        if left:
            self._per_client[connection.client] = left
        else:
            self._per_client.pop(connection.client, None)
        self._closed.set()


class GuardedProtocol(asyncio.Protocol):
    """Another server's protocol, with the guard told when its connection opens, when bytes come and when it closes.
    For servers whose protocol is made by a factory of their own (aiohttp's); the server reports `busy` and `idle`
    from its request handling."""

    def __init__(self, inner: asyncio.Protocol, guard: ConnectionGuard) -> None:
        self.inner = inner
        self.guard = guard
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.guard.opened(transport)
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self.transport is not None:
            self.guard.reading(self.transport)
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        try:
            self.inner.connection_lost(exc)
        finally:
            if self.transport is not None:
                self.guard.closed(self.transport)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket (OSError when the address cannot be had)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=LISTEN_BACKLOG)


__all__ = ["ConnectionGuard", "ConnectionLimits", "GuardedProtocol", "State", "bind"]
