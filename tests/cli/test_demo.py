"""`mcp-chat-bridge demo` as a process: it says where its store is, and a 2026 request asked before a restart is
answered after it (the demo server's requestState key is kept in the demo's state folder)."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest


class Demo:
    def __init__(self, state: Path) -> None:
        env = {**os.environ, "XDG_STATE_HOME": str(state)}
        env.pop("MCP_CHAT_BRIDGE_DEMO_KEY", None)
        self.proc = subprocess.Popen([sys.executable, "-m", "bridge.cli", "demo"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.reader = threading.Thread(target=self._pump, daemon=True)
        self.reader.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def wait_for(self, text: str) -> None:
        while True:
            try:
                line = self.lines.get(timeout=30)
            except queue.Empty:
                pytest.fail(f"{text!r} never appeared; saw: {''.join(self.seen)}")
            self.seen.append(line)
            if text in line:
                return

    def type(self, *lines: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("".join(f"{line}\n" for line in lines))
        self.proc.stdin.flush()

    def stop(self, sig: int | None = signal.SIGTERM) -> int:
        if sig is not None:
            self.proc.send_signal(sig)
        else:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        code = self.proc.wait(timeout=30)
        self.reader.join(timeout=10)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None and not pipe.closed:
                pipe.close()
        return code


def test_a_2026_request_survives_a_restart_of_the_demo(tmp_path: Path) -> None:
    first = Demo(tmp_path)
    first.wait_for(f"The demo keeps its store in {tmp_path}/mcp-chat-bridge/demo.db")
    first.type("!mcp call demo plan_trip")
    first.wait_for("asks you to fill in a form")
    assert first.stop() == 0
    key = tmp_path / "mcp-chat-bridge" / "demo-request-state.key"
    assert key.stat().st_mode & 0o777 == 0o600

    second = Demo(tmp_path)
    second.wait_for("asks you to fill in a form")  # shown again: the request was kept
    second.type("Ada", "ada@example.com", "", "2026-12-01", "", "", "", "", "", "2", "", "", "", "accept")
    second.wait_for("Trip planned with:")
    assert second.stop(None) == 0
    assert any('"name": "Ada"' in line for line in second.seen)
