"""`run` as a process serves /metrics with its `--worker-id`, wired as the README says: a console conversation with the
demo server over stdio, scraped over HTTP before and while a form waits."""

from __future__ import annotations

import queue
import sys
from pathlib import Path

import httpx2
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.harness.console_run import finish, free_port, launch


def scrape(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = httpx2.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_run_serves_metrics_named_for_its_worker(tmp_path: Path) -> None:
    port = free_port()
    config = tmp_path / "bridge.yaml"
    config.write_text(yaml.safe_dump({
        "store": str(tmp_path / "bridge.db"), "http": {"listen": f"127.0.0.1:{port}"},
        "servers": {"demo": {"command": sys.executable, "args": ["-m", "bridge.cli.demo.server"], "prestart": True,
                             "env": {"XDG_STATE_HOME": str(tmp_path / "state")}}},
        "chat": {"console": {}}}))
    proc, lines, reader = launch(config, run=("--worker-id", "w-proc"))

    def wait_line(text: str) -> None:
        while text not in lines.get(timeout=60):
            pass

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
        finish(proc, reader)
    assert proc.returncode == 0
