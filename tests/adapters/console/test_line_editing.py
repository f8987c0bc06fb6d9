"""The console at a real terminal: `mcp-chat-bridge demo` inside tmux (a pseudo-terminal whose screen can be read).

Arrow-up recalls the last command, Tab completes a command word, a server's name and one of its tools, and Ctrl-D
ends the session cleanly. Without a terminal (a pipe) the plain line reader is used: tests/cli/test_demo.py.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.hosts import patient

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux for a pseudo-terminal")

ROOT = Path(__file__).resolve().parents[3]


class Terminal:
    """One tmux server of this test's own (its own socket), running one command in an 200x50 window."""

    def __init__(self, command: str, env: dict[str, str]) -> None:
        self.socket = f"mcb-test-{uuid.uuid4().hex[:8]}"
        flags = [arg for name, value in env.items() for arg in ("-e", f"{name}={value}")]
        # The shell stays after the command so its exit status can be read off the screen.
        self.tmux("new-session", "-d", "-x", "200", "-y", "50", *flags, "-c", str(ROOT),
                  f"{command}; echo EXITED $?; exec cat")

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], check=True, capture_output=True,
                              text=True).stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p")

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", *keys)

    def wait_for(self, predicate_text: str, *, count: int = 1) -> str:
        """The screen once `predicate_text` shows on it `count` times (tmux has no event to wait on: poll)."""
        deadline = time.monotonic() + patient(60)
        while True:
            screen = self.screen()
            if screen.count(predicate_text) >= count:
                return screen
            if time.monotonic() > deadline:
                pytest.fail(f"{predicate_text!r} (x{count}) never showed; the screen:\n{screen}")
            time.sleep(0.05)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, check=False)


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    term = Terminal(f"{sys.executable} -m bridge.cli demo", {"XDG_STATE_HOME": str(tmp_path), "TERM": "xterm"})
    try:
        yield term
    finally:
        term.close()


def _prompt_line(screen: str) -> str:
    return [line for line in screen.splitlines() if line.startswith("mcp>")][-1]


def test_history_completion_and_ctrl_d(terminal: Terminal) -> None:
    terminal.wait_for("mcp>")  # capture-pane drops trailing spaces
    terminal.keys("!mcp serv", "Tab")
    assert _prompt_line(terminal.wait_for("!mcp servers")) == "mcp> !mcp servers"
    terminal.keys("Enter")
    terminal.wait_for("not started (starts on first use)")

    # Tab after `call ` offers the servers; after `call demo ` the demo's tools (the server starts to list them).
    terminal.keys("!mcp call de", "Tab")
    terminal.wait_for("mcp> !mcp call demo")
    terminal.keys(" cou", "Tab")
    assert _prompt_line(terminal.wait_for("count_down")).rstrip() == "mcp> !mcp call demo count_down"

    # Arrow-up on an emptied line recalls the last command run (not `^[[A`).
    terminal.keys("C-u", "Up")
    screen = terminal.wait_for("mcp> !mcp servers", count=2)
    assert "^[[A" not in screen
    assert _prompt_line(screen).rstrip() == "mcp> !mcp servers"

    terminal.keys("C-u", "C-d")
    assert "EXITED 0" in terminal.wait_for("EXITED")


def test_output_while_typing_is_printed_above_the_prompt(terminal: Terminal) -> None:
    """A call's progress printed while the person types does not break the line being typed."""
    terminal.wait_for("mcp>")  # capture-pane drops trailing spaces
    terminal.keys('!mcp call demo count_down {"steps": 2, "seconds": 0.5}', "Enter")
    terminal.keys("!mcp hel")
    screen = terminal.wait_for("count_down: ")
    screen = terminal.wait_for("mcp> !mcp hel")
    assert _prompt_line(screen).rstrip() == "mcp> !mcp hel"
    terminal.keys("C-u", "C-d")
    terminal.wait_for("EXITED")


def test_ctrl_c_at_the_prompt_stops_the_bridge_during_a_call(terminal: Terminal) -> None:
    """Ctrl-C reaches the bridge's own SIGINT handling (prompt_toolkit's handler is not installed over it), also
    after a first line was read: the running call is stopped and the process ends."""
    terminal.wait_for("mcp>")
    terminal.keys("!mcp servers", "Enter")
    terminal.wait_for("not started (starts on first use)")
    terminal.keys('!mcp call demo count_down {"steps": 50, "seconds": 0.5}', "Enter")
    terminal.wait_for("/50")
    terminal.keys("C-c")
    screen = terminal.wait_for("EXITED")
    assert "50/50" not in screen
