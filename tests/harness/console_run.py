"""One `mcp-chat-bridge run` process with the console adapter, driven from a test: started with its output read line
by line on a thread (`launch`), typed into (`type_line`), watched (`wait_line`) and stopped (`finish`)."""

from __future__ import annotations

import queue
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest


def free_port() -> int:
    """A port free now, released for the bridge's HTTP server to take."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def launch(config: Path, *options: str, run: Sequence[str] = ()) -> tuple[subprocess.Popen[str], queue.Queue[str],
                                                                         threading.Thread]:
    """`run -c config` (after the global `options`, followed by `run`'s own), and its stdout's lines as they come."""
    proc = subprocess.Popen([sys.executable, "-m", "bridge.cli", *options, "run", "-c", str(config), *run],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    return proc, lines, reader


def wait_line(lines: queue.Queue[str], text: str) -> str:
    seen: list[str] = []
    while True:
        try:
            line = lines.get(timeout=30)
        except queue.Empty:
            pytest.fail(f"{text!r} never appeared; saw: {''.join(seen)}")
        seen.append(line)
        if text in line:
            return line


def type_line(proc: subprocess.Popen[str], *lines: str) -> None:
    assert proc.stdin is not None
    proc.stdin.write("".join(f"{line}\n" for line in lines))
    proc.stdin.flush()


def finish(proc: subprocess.Popen[str], reader: threading.Thread, sig: int = signal.SIGTERM) -> str:
    """Stop a `run` process with `sig`; its stderr."""
    proc.send_signal(sig)
    proc.wait(timeout=30)
    reader.join(timeout=10)
    assert proc.stderr is not None
    err = proc.stderr.read()
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        assert pipe is not None
        pipe.close()
    return err
