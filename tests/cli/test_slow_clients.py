"""`run` with the HTTP server on, and an open-file limit of 256, against 300 idle and half-sent connections: /healthz
keeps answering while they are held, each is closed at its deadline, and the log stays a few lines long."""

from __future__ import annotations

import resource
import selectors
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx2
import pytest
import yaml

from tests.harness.fleet import Output, free_port

pytestmark = pytest.mark.anyio

FILE_LIMIT = 256
CONNECTIONS = 300
CLIENTS = 10
"""Source addresses the connections come from (127.0.0.2 …): the overall limits are reached, not the per-client one."""
DEADLINE = 6.0
"""The test config's idle and read timeouts, in seconds."""


def low_file_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (FILE_LIMIT, FILE_LIMIT))


def half_sent(i: int, port: int) -> socket.socket:
    """Nothing at all, half a request head, or a whole head with half its body."""
    sock = socket.socket()
    sock.bind((f"127.0.0.{2 + i % CLIENTS}", 0))
    sock.settimeout(60)
    sock.connect(("127.0.0.1", port))
    head = b"POST /healthz HTTP/1.1\r\nHost: bridge\r\nContent-Length: 1000\r\n"
    sock.sendall([b"", head[:20], head + b"\r\n" + b"x" * 10][i % 3])
    sock.setblocking(False)
    return sock


def wait_readable(sockets: list[socket.socket], timeout: float) -> None:
    with selectors.DefaultSelector() as selector:
        for sock in sockets:
            selector.register(sock, selectors.EVENT_READ)
        selector.select(timeout)


def still_open(sock: socket.socket) -> bool:
    """Whether the bridge still holds the connection (what it answered, if anything, is read and dropped)."""
    try:
        while chunk := sock.recv(65536):
            del chunk
    except BlockingIOError:
        return True
    except OSError:
        return False
    return False


def start(config: Path) -> subprocess.Popen[bytes]:
    # stdin stays open: the console adapter ends the bridge at end of input.
    return subprocess.Popen([sys.executable, "-m", "bridge.cli", "--log-level", "info", "run", "-c", str(config)],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def stop(proc: subprocess.Popen[bytes], output: Output) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    output.reader.join(timeout=10)
    for pipe in (proc.stdin, proc.stderr):
        assert pipe is not None
        pipe.close()


def attack(port: int) -> None:
    """Open the connections, ask /healthz three times while they are held, and wait until the bridge closed each."""
    sockets = []
    try:
        sockets = [half_sent(i, port) for i in range(CONNECTIONS)]
        held, latencies = [], []
        for _ in range(3):
            started = time.monotonic()
            health = httpx2.get(f"http://127.0.0.1:{port}/healthz", timeout=30)
            latencies.append(time.monotonic() - started)
            held.append(sum(map(still_open, sockets)))
            assert (health.status_code, health.text) == (200, "ok\n")
        print(f"\nheld {held} of {CONNECTIONS}; /healthz answered in "
              f"{', '.join(f'{s * 1000:.1f} ms' for s in latencies)}")
        assert min(held) >= 200  # hundreds were open, and held, while /healthz answered
        give_up = time.monotonic() + DEADLINE * 10
        while any(still_open(s) for s in sockets):  # each is closed by the bridge at its deadline
            assert time.monotonic() < give_up, f"{sum(map(still_open, sockets))} connections still open"
            wait_readable([s for s in sockets if still_open(s)], 1)
        assert httpx2.get(f"http://127.0.0.1:{port}/healthz", timeout=30).status_code == 200
    finally:
        for sock in sockets:
            sock.close()


async def test_healthz_answers_while_hundreds_of_idle_connections_are_held(tmp_path: Path) -> None:
    port = free_port()
    config = tmp_path / "bridge.yaml"
    config.write_text(yaml.safe_dump({
        "store": str(tmp_path / "bridge.db"), "servers": {}, "chat": {"console": {}},
        "http": {"listen": f"127.0.0.1:{port}", "idle_timeout": DEADLINE, "read_timeout": DEADLINE}}))
    proc = await anyio.to_thread.run_sync(start, config)
    output = Output(proc)
    try:
        await output.wait_for("HTTP server listening")
        # The limit is set on the running process (prlimit), as a container's would be.
        resource.prlimit(proc.pid, resource.RLIMIT_NOFILE, (FILE_LIMIT, FILE_LIMIT))
        await anyio.to_thread.run_sync(attack, port)
    finally:
        await anyio.to_thread.run_sync(stop, proc, output)
    lines = output.lines
    assert len(lines) < 40, "".join(lines[:60])  # startup, a warning or two, shutdown: not one line per attempt
    assert not [line for line in lines if "Traceback" in line or "ERROR" in line], "".join(lines)
