"""Shared fixtures: the asyncio backend (the SDK and adapters run on it), the npm MCP peers, a real Synapse and a real
PostgreSQL."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridge import redaction
from bridge.cli import setup_logging
from tests.matrixhs.synapse import Synapse
from tests.pg.cluster import PostgresCluster, PostgresUnavailable

ROOT = Path(__file__).resolve().parent.parent
EVERYTHING = ROOT / "tests/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def everything_js() -> Path:
    """server-everything's entry point, installed by the test command (`npm ci` in tests/npm)."""
    if not EVERYTHING.exists():
        pytest.fail(f"{EVERYTHING} is missing: run `bash scripts/dev.sh test` (it runs npm ci in tests/npm)")
    return EVERYTHING


@pytest.fixture(scope="session")
def synapse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synapse]:
    """One real Synapse for the whole test session (unique users per test); its workdir keeps the logs of a failed
    run."""
    with Synapse(tmp_path_factory.mktemp("synapse")) as server:
        yield server


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresCluster]:
    """One throwaway PostgreSQL cluster for the whole test session (a fresh database per test: `create_database`).
    Skipped, saying why, only when the server binaries are not installed and cannot be (scripts/install-postgres.sh)."""
    try:
        cluster = PostgresCluster()
    except PostgresUnavailable as exc:
        pytest.skip(str(exc))
    with cluster:
        yield cluster


@pytest.fixture
def debug_logs() -> Iterator[io.StringIO]:
    """The bridge's logging set up as `--log-level debug` sets it, into a buffer; put back afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    levels = {name: logging.getLogger(name).level for name in (*redaction.PAYLOAD_LOGGERS, "aiohttp.access")}
    buffer = io.StringIO()
    setup_logging("debug", False, buffer)
    try:
        yield buffer
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        for name, old in levels.items():
            logging.getLogger(name).setLevel(old)
