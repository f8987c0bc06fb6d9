"""The CLI and the store: errors in one line with exit 2 (never a password), and /readyz asking the store."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import httpx2
import pytest
import yaml

from bridge.cli.monitoring import store_check
from bridge.storage import open_store
from bridge.web.server import HttpServer
from tests.cli.test_run import start
from tests.harness.console_run import wait_line
from tests.harness.postgres import PostgresCluster

pytestmark = pytest.mark.anyio


def run(config: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bridge.cli", "run", "-c", str(config), *extra],
                          capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL,
                          env={**os.environ, **(env or {})})


def test_a_second_process_on_one_sqlite_store_is_refused_in_one_line(tmp_path: Path) -> None:
    first, lines, db, reader = start(tmp_path, "auto")
    try:
        wait_line(lines, "mcp-chat-bridge")  # the banner: it holds the store
        second = run(tmp_path / "bridge.yaml")
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=30)
        reader.join(timeout=10)
        for pipe in (first.stdin, first.stdout, first.stderr):
            assert pipe is not None
            pipe.close()
    assert second.returncode == 2
    assert second.stderr.strip().splitlines() == [
        f"error: the store {db} is in use by process {first.pid} (one bridge process per SQLite store; stop it "
        "first, or use a Postgres store for several workers)"]


def test_an_unreachable_postgres_store_is_one_line_without_the_password(tmp_path: Path,
                                                                        postgres: PostgresCluster) -> None:
    url = postgres.url("no_such_db").replace("bridge@", "bridge:${BRIDGE_PG_PASSWORD}@")
    config = tmp_path / "bridge.yaml"
    config.write_text(yaml.safe_dump({"store": url, "chat": {"console": {}}}))
    done = run(config, "--worker-id", "w-test", env={"BRIDGE_PG_PASSWORD": "s3cret-Pw"})
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: cannot reach the postgres database no_such_db") and "no_such_db" in line
    assert "s3cret-Pw" not in done.stderr + done.stdout


async def test_readyz_asks_the_store(pg_url: str) -> None:
    store = await open_store(pg_url, worker_id="ready")
    http = HttpServer("127.0.0.1:0")
    http.readiness("store", store_check(store))
    async with anyio.create_task_group() as tg:
        await tg.start(http.serve)
        async with httpx2.AsyncClient() as client:
            ok = await client.get(http.url("/readyz"))
            await store.aclose()
            gone = await client.get(http.url("/readyz"))
        tg.cancel_scope.cancel()
    assert (ok.status_code, ok.json()) == (200, {"ready": True, "checks": {"store": "ok"}})
    assert gone.status_code == 503 and gone.json()["ready"] is False
    assert gone.json()["checks"]["store"] == "the store is closed"  # the store's own one-line reason

