"""The terminal's sign-in redirect: a one-shot loopback listener (`LoopbackListener`) serving the one callback
handler (`bridge.auth.signins`) as a small ASGI app (`callback_app`). Chat sign-ins come back to the bridge's own
HTTP server instead (`bridge.auth.accounts`)."""

from __future__ import annotations

import contextlib
import ipaddress
import socket
from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlsplit

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.routing import Route

from bridge.auth.signins import Authorizations, endpoint
from bridge.errors import AuthError

CALLBACK_PATH = "/callback"


def callback_app(authorizations: Authorizations, path: str = CALLBACK_PATH) -> Starlette:
    return Starlette(routes=[Route(path, endpoint(authorizations), methods=["GET"])])


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # The command that owns this listener decides what Ctrl-C means, not the listener.
        yield


class LoopbackListener:
    """A one-shot HTTP listener on a loopback address for the terminal's sign-ins (RFC 8252 §7.3).

    The socket is bound when this is made, so the redirect URI (with its port) is known before registration; it
    only answers while `serving()` is open.
    """

    def __init__(self, authorizations: Authorizations, redirect_uri: str | None = None) -> None:
        host, port, path = "127.0.0.1", 0, CALLBACK_PATH
        if redirect_uri:
            parts = urlsplit(redirect_uri)
            host, path = parts.hostname or host, parts.path or "/"
            if parts.scheme != "http" or not _is_loopback(host) or parts.port is None:
                raise AuthError(f"the redirect URI {redirect_uri} is not a loopback http:// address with a port, so "
                                "a terminal cannot receive it; use http://127.0.0.1:<port>/<path>")
            port = parts.port
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._socket.bind((host, port))
        except OSError as exc:
            self._socket.close()
            raise AuthError(f"cannot listen on {host}:{port} for the sign-in redirect: {exc.strerror}") from None
        bound_port = self._socket.getsockname()[1]
        shown = f"[{host}]" if family == socket.AF_INET6 else host
        self.redirect_uri = f"http://{shown}:{bound_port}{path}"
        self._app = callback_app(authorizations, path)

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """Answer redirects while open. Once closed the socket is gone: one listener serves one stretch."""
        server = _Server(uvicorn.Config(self._app, log_level="warning", access_log=False, lifespan="off"))

        async def run() -> None:
            # Shielded, and stopped through should_exit: cancelled midway, uvicorn would leave its server open.
            with anyio.CancelScope(shield=True):
                await server.serve([self._socket])

        async with anyio.create_task_group() as tg:
            self._socket.listen()
            tg.start_soon(run)
            try:
                yield
            finally:
                server.should_exit = True

    def close(self) -> None:
        self._socket.close()


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
