"""`run` as a process serves /metrics with its `--worker-id`, wired as the README says: a console conversation with the
demo server over stdio, scraped over HTTP before and while a form waits."""

from __future__ import annotations

import queue
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx2
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families


def scrape(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = httpx2.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_run_serves_metrics_named_for_its_worker(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a free port, released for the bridge to take
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = tmp_path / "bridge.yaml"
    config.write_text(yaml.safe_dump({
        "store": str(tmp_path / "bridge.db"), "http": {"listen": f"127.0.0.1:{port}"},
        "servers": {"demo": {"command": sys.executable, "args": ["-m", "bridge.cli.demo.server"], "prestart": True,
                             "env": {"XDG_STATE_HOME": str(tmp_path / "state")}}},
        "chat": {"console": {}}}))
    proc = subprocess.Popen([sys.executable, "-m", "bridge.cli", "run", "-c", str(config), "--worker-id", "w-proc"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)

    def wait_line(text: str) -> None:
        while text not in lines.get(timeout=60):
            pass

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    assert proc.stdin is not None
    try:
        wait_line("on the console")  # the banner: serving
        before = scrape(port)
        form = frozenset({("worker", "w-proc"), ("kind", "form"), ("platform", "console")})
        assert before[("mcp_bridge_open_interactions", form)] == 0
        proc.stdin.write("!mcp call demo plan_trip\n")
        proc.stdin.flush()
        wait_line("asks you to fill in a form")
        during = scrape(port)
        assert during[("mcp_bridge_open_interactions", form)] == 1
        ready = frozenset({("worker", "w-proc"), ("server", "demo"), ("state", "ready")})
        assert during[("mcp_bridge_sessions", ready)] == 1
        assert all(dict(labels)["worker"] == "w-proc" for _, labels in during)
    except queue.Empty:
        pytest.fail("the bridge did not get there in time")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        reader.join(timeout=10)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            assert pipe is not None
            pipe.close()
    assert proc.returncode == 0
