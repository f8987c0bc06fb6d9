"""Slack with no network, as a real `run` process: one plain line per attempt, further apart each time, nothing else
(no ERROR with a traceback, no warning about SLACK_BOT_TOKEN, no unclosed session), and a clean stop on Ctrl-C."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import yaml

from tests.harness.hosts import patient


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_slack_unreachable_is_one_line_per_attempt_with_a_backoff_and_a_clean_stop(tmp_path: Path) -> None:
    config = tmp_path / "bridge.yaml"
    config.write_text(yaml.safe_dump({
        "store": str(tmp_path / "s.db"), "servers": {"e": {"command": "echo"}},
        "chat": {"slack": {"bot_token": "xoxb-1-config", "app_token": "xapp-1-config",
                           "api_url": f"http://127.0.0.1:{closed_port()}/api/"}}}))
    env = {**os.environ, "SLACK_BOT_TOKEN": "xoxb-2-environment", "XDG_STATE_HOME": str(tmp_path / "state")}
    proc = subprocess.Popen([sys.executable, "-m", "bridge.cli", "run", "-c", str(config)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stderr is not None
    seen: list[str] = []
    try:
        while sum("Slack is not reachable" in line for line in seen) < 3:  # blocks until the third attempt failed
            line = proc.stderr.readline()
            assert line, "".join(seen)
            seen.append(line)
        proc.send_signal(signal.SIGINT)
        _, rest = proc.communicate(timeout=patient(60))
    finally:
        proc.kill()
        proc.wait()
    lines = [line for line in "".join(seen).splitlines() + rest.splitlines()
             if line.strip() and "warning: audit" not in line and "audit log" not in line]
    attempts = [line for line in lines if "Slack is not reachable" in line]
    assert [re.search(r"trying again in (\S+)$", line).group(1) for line in attempts] == ["1s", "2s", "4s"]  # type: ignore[union-attr]
    assert all(" WARNING " in line and "Cannot connect to host" in line for line in attempts)
    assert lines[len(attempts):] == ["interrupted (Ctrl-C)"], lines
    assert proc.returncode == 130


def test_a_socket_mode_reconnect_failure_is_one_warning_line() -> None:
    import io
    import logging

    from adapters.slack.reaching import quiet_bolt
    from bridge.cli.entry import setup_logging

    out = io.StringIO()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    setup_logging("info", False, out)
    quiet_bolt()
    bolt = logging.getLogger("slack_bolt.AsyncApp")
    try:
        try:
            raise ConnectionError("Cannot connect to host slack.com:443")
        except ConnectionError as exc:
            bolt.exception(f"Failed to connect (error: {exc}); Retrying...")  # as slack_sdk's Socket Mode client does
        bolt.warning("As you gave `client` as well, `token` will be unused.")
    finally:
        root.handlers[:], root.level = handlers, level
    [line] = out.getvalue().splitlines()
    assert line.endswith("WARNING slack_bolt.AsyncApp: Slack Socket Mode: Failed to connect (error: Cannot connect "
                         "to host slack.com:443); retrying")
