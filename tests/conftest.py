"""Shared fixtures: the asyncio backend (the SDK and adapters run on it), the npm MCP peers, a real Synapse and a real
PostgreSQL."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bridge.testing import HOST_STORES
from tests.matrixhs.synapse import Synapse
from tests.pg.cluster import PostgresCluster, PostgresUnavailable

ROOT = Path(__file__).resolve().parent.parent
EVERYTHING = ROOT / "tests/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def host_stores(anyio_backend: object) -> AsyncIterator[None]:
    """Close the stores test hosts opened (`bridge.testing.host_store`), once the test has read them."""
    yield
    await HOST_STORES.close_all()


@pytest.fixture(autouse=True)
def close_host_stores(request: pytest.FixtureRequest) -> None:
    """`host_stores` for every async test (on the test's own event loop; sync tests may run loops of their own)."""
    if inspect.iscoroutinefunction(getattr(request.node, "obj", None)):
        request.getfixturevalue("host_stores")


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
