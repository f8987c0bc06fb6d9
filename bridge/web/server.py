"""The bridge's one small HTTP server: health, readiness, metrics, the OAuth callback and web forms.

Features register their routes on one `HttpServer` before it starts; nothing else in the bridge listens on a port.
It runs Starlette on uvicorn's h11 protocol (both already installed with the `mcp` SDK) inside a task group the caller
owns. The socket is bound here rather than by uvicorn, so a port in use is a clean `HttpServerError`, and uvicorn's own
signal handling is not used: the bridge's `run` owns SIGINT and SIGTERM.

Slow and idle clients are shed by a `ConnectionGuard` (bridge.web.guard), which also runs the accept loop. Why not a
server that does it all: uvicorn's options cover part of it (`timeout_keep_alive` starts only after a first response,
`limit_concurrency` answers 503 but keeps every connection open, and its accept loop is asyncio's, which logs once per
attempt when file descriptors run out). Hypercorn has a read timeout but the same asyncio accept loop and no cap per
client address; granian has header-read timeouts but runs its own runtime in worker processes or threads, away from
the event loop the bridge's routes share with the host. So the bridge keeps uvicorn's well-tested HTTP parsing (h11)
and adds the deadlines, the caps and the accept loop in one small layer of its own, which Slack's HTTP mode uses too.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.abc import TaskStatus
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from bridge.errors import BridgeError
from bridge.web.guard import ConnectionGuard, ConnectionLimits, bind

logger = logging.getLogger(__name__)

Endpoint = Callable[[Request], Awaitable[Response]]
ReadinessCheck = Callable[[], Awaitable[str | None]]
"""Returns None when the part it checks is ready, else a short reason (shown on /readyz, never a secret)."""

SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class HttpServerError(BridgeError):
    """The HTTP server could not start (a bad listen address, a port in use)."""


@dataclass(frozen=True, slots=True)
class Listen:
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> Listen:
        """`host:port`, `:port` (loopback) or `[::1]:port`."""
        host, sep, port = text.rpartition(":")
        if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise HttpServerError(f"http.listen: {text!r} is not host:port")
        host = host.strip("[]") or "127.0.0.1"
        return cls(host, int(port))


class HttpServer:
    """Routes registered by features, served until the owning task group is cancelled."""

    def __init__(self, listen: str, public_url: str = "", limits: ConnectionLimits | None = None) -> None:
        self.listen = Listen.parse(listen)
        self.limits = limits or ConnectionLimits()
        self.public_url = public_url.rstrip("/")
        self._routes: list[Route] = []
        self._ready: dict[str, ReadinessCheck] = {}
        self.port = 0
        """The bound port once serving (useful with port 0 in tests)."""
        self.guard: ConnectionGuard | None = None
        """The connections being served, once serving."""
        self.route("/healthz", self._healthz)
        self.route("/readyz", self._readyz)

    # -- registration --------------------------------------------------------------------------------------------

    def route(self, path: str, endpoint: Endpoint, methods: tuple[str, ...] = ("GET",)) -> None:
        self._routes.append(Route(path, endpoint, methods=list(methods)))

    def readiness(self, name: str, check: ReadinessCheck) -> None:
        """Add a check to /readyz (adapters connected, store writable, ...)."""
        self._ready[name] = check

    def url(self, path: str) -> str:
        """The public address of `path` (for links people open), or the local one when none is configured."""
        base = self.public_url or f"http://{self.listen.host}:{self.port or self.listen.port}"
        return base + path

    # -- built-in endpoints --------------------------------------------------------------------------------------

    async def _healthz(self, request: Request) -> Response:
        return PlainTextResponse("ok\n", headers=SECURITY_HEADERS)

    async def _readyz(self, request: Request) -> Response:
        problems: dict[str, str] = {}
        for name, check in self._ready.items():
            try:
                reason = await check()
            except Exception as exc:  # noqa: BLE001 - a failing check means not ready, never a 500 with a traceback
                logger.warning("readiness check %s failed: %s", name, exc)
                reason = f"check failed ({type(exc).__name__})"
            if reason is not None:
                problems[name] = reason
        body: dict[str, Any] = {"ready": not problems, "checks": {n: problems.get(n, "ok") for n in self._ready}}
        return JSONResponse(body, status_code=503 if problems else 200, headers=SECURITY_HEADERS)

    # -- serving -------------------------------------------------------------------------------------------------

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Bind, report started, and serve until cancelled; then close connections within a few seconds."""
        import uvicorn  # loaded only when the bridge serves HTTP: it costs start time

        try:
            sock = bind(self.listen.host, self.listen.port)
        except OSError as exc:
            raise HttpServerError(f"http.listen: cannot listen on {self.listen.host}:{self.listen.port}: "
                                  f"{exc.strerror or exc}") from None
        self.port = sock.getsockname()[1]
        from bridge.web.h11 import GuardedH11Protocol

        app = Starlette(routes=self._routes)
        config = uvicorn.Config(app, http="h11", lifespan="off", log_config=None, access_log=False,
                                server_header=False, timeout_keep_alive=max(1, round(self.limits.idle_timeout)))
        config.load()
        server = uvicorn.Server(config)
        server.lifespan = config.lifespan_class(config)
        self.guard = guard = ConnectionGuard(self.limits, "HTTP server")
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(guard.serve, sock,
                              lambda: GuardedH11Protocol(guard, config, server.server_state, server.lifespan.state))
                logger.info("HTTP server listening on %s:%d", self.listen.host, self.port)
                task_status.started()
        finally:
            with anyio.move_on_after(5, shield=True):
                server.servers = []  # the accept loop was the guard's, and is over
                await server.shutdown()
            sock.close()

__all__ = ["HttpServer", "HttpServerError", "Listen", "ReadinessCheck"]
