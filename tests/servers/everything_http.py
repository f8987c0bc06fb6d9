"""`@modelcontextprotocol/server-everything` over streamable HTTP (`node dist/index.js streamableHttp`), on a free
loopback port, for as long as a test needs it: the reference server's HTTP transport, where a task is bound to the
HTTP session (`Mcp-Session-Id`) that created it."""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.harness.fleet import free_port
from tests.harness.hosts import patient


@contextmanager
def everything_http(everything_js: Path) -> Iterator[str]:
    """Start it and yield its MCP endpoint's URL once it listens (it says so on stderr, which a thread drains so
    the server never blocks on a full pipe)."""
    port = free_port()
    process = subprocess.Popen(["node", str(everything_js), "streamableHttp"], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PORT": str(port)})
    listening = threading.Event()
    heard: list[str] = []

    def drain() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            heard.append(line)
            if "listening on port" in line:
                listening.set()

    reader = threading.Thread(target=drain, name="everything-stderr", daemon=True)
    reader.start()
    try:
        if not listening.wait(patient(30)):
            raise TimeoutError(f"server-everything did not start: {''.join(heard)!r}")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        reader.join(10)
        if process.stderr is not None:
            process.stderr.close()
