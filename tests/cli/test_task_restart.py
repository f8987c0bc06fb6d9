"""A task running when `mcp-chat-bridge run` is killed (SIGKILL): after the restart its status card is picked up
again where the server still knows the task (server-everything over streamable HTTP, which keeps it for the HTTP
session that created it), or the conversation is told once that it was lost (over stdio the server process is
started again with the bridge and knows nothing of it)."""

from __future__ import annotations

import queue
import signal
import subprocess
import threading
from pathlib import Path

import anyio
import yaml

from tests.cli.test_run import count
from tests.harness.console_run import finish, launch, type_line, wait_line
from tests.servers.everything_http import everything_http


def start(tmp_path: Path, server: dict[str, object]) -> tuple[subprocess.Popen[str], queue.Queue[str],
                                                              threading.Thread]:
    config = tmp_path / "bridge.yaml"
    config.write_text(yaml.safe_dump({"store": str(tmp_path / "bridge.db"), "servers": {"everything": server},
                                      "chat": {"console": {}}}))
    return launch(config, "--log-json", "--log-level", "info")


CALL = '!mcp call everything simulate-research-query {"topic": "tides"}'


def killed_while_the_task_runs(tmp_path: Path, server: dict[str, object]) -> None:
    proc, lines, reader = start(tmp_path, server)
    type_line(proc, CALL)
    # A stage after the first: its row was stored (synced) before the card was first shown. (Polled once a
    # second, a stage of about a second may be skipped, so any later one will do.)
    while "Gathering sources" in wait_line(lines, "task working: "):
        pass
    finish(proc, reader, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL


def test_after_kill_9_a_task_on_an_http_server_is_picked_up_again_and_its_result_posted(
        tmp_path: Path, everything_js: Path) -> None:
    with everything_http(everything_js) as url:
        killed_while_the_task_runs(tmp_path, {"url": url})
        again, lines, reader = start(tmp_path, {"url": url})
        try:
            wait_line(lines, "everything.simulate-research-query: task completed · ")
            report = wait_line(lines, "# Research Report: tides")
        finally:
            err = finish(again, reader)
    assert report and "Traceback" not in err and "was interrupted" not in err
    assert '"picked up task' in err or "picked up task" in err
    assert anyio.run(count, tmp_path / "bridge.db", "tasks") == 0
    assert anyio.run(count, tmp_path / "bridge.db", "running_calls") == 0


def test_after_kill_9_a_task_on_a_stdio_server_is_told_lost_once(tmp_path: Path, everything_js: Path) -> None:
    server: dict[str, object] = {"command": "node", "args": [str(everything_js), "stdio"]}
    killed_while_the_task_runs(tmp_path, server)
    again, lines, reader = start(tmp_path, server)
    try:
        told = wait_line(lines, "the task was lost when the bridge restarted")
        type_line(again, "!mcp servers")
        listing = wait_line(lines, "everything")
    finally:
        err = finish(again, reader)
    assert "everything.simulate-research-query: the task was lost" in told and "(stdio)" in told
    assert listing and "Traceback" not in err
    assert anyio.run(count, tmp_path / "bridge.db", "tasks") == 0
    assert anyio.run(count, tmp_path / "bridge.db", "running_calls") == 0
