"""Serve an ASGI app (an MCP server, an authorization server) on a loopback port for the length of a test.

The socket is bound and listening before the server thread starts, so clients may connect at once (the kernel holds
the connection until uvicorn accepts it): no waiting for readiness.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn


class _Server(uvicorn.Server):
    def install_signal_handlers(self) -> None:  # pragma: no cover - older uvicorn
        pass

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # not the main thread's signals to take


def bound_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    return sock


def base_url(sock: socket.socket) -> str:
    return f"http://127.0.0.1:{sock.getsockname()[1]}"


@contextmanager
def serve(app: Any, sock: socket.socket | None = None) -> Iterator[str]:
    """Run `app` on `sock` (or a fresh loopback socket) in a thread; yields the base URL."""
    sock = sock or bound_socket()
    server = _Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="test-http", daemon=True)
    thread.start()
    try:
        yield base_url(sock)
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
