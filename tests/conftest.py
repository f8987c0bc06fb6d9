"""Shared fixtures: the asyncio backend (the SDK and adapters run on it), the npm MCP peers, a real Synapse and a real
PostgreSQL."""

from __future__ import annotations

import inspect
import io
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bridge.cli.entry import setup_logging
from bridge.safety import redaction
from bridge.testing import HOST_STORES, time_scale
from tests.harness.postgres import PostgresCluster, PostgresUnavailable, store_location
from tests.harness.synapse import Synapse
from tests.llm.fake_llm_server import FakeLLMServer

ROOT = Path(__file__).resolve().parent.parent
EVERYTHING = ROOT / "tests/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    # pytest-timeout's limit (pyproject's `timeout`, unless given on the command line) scales like every deadline a
    # test sets itself (bridge.testing.patient), so a loaded machine never meets one before the other.
    if config.getoption("timeout", None) is None:
        config.option.timeout = float(config.getini("timeout")) * time_scale()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # `both_engines` (a module's `pytestmark`): every async test there runs twice, on SQLite and on Postgres (its
    # hosts' stores, `store_target`). The core and adapter tests that use the store carry it; the storage tests
    # choose their engines themselves, tests of several workers are Postgres only, and the CLI and Matrix tests keep
    # SQLite (they run whole processes or a homeserver, which a second pass would only make slower).
    if (metafunc.definition.get_closest_marker("both_engines") is not None
            and inspect.iscoroutinefunction(metafunc.function) and "store_engine" not in metafunc.fixturenames):
        metafunc.fixturenames.append("store_engine")
        metafunc.parametrize("store_engine", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
                             indirect=True)


@pytest.fixture
def store_engine(request: pytest.FixtureRequest) -> str:
    """The engine of this test's stores: "sqlite" unless the test is in its Postgres pass."""
    return str(getattr(request, "param", "sqlite"))


@pytest.fixture
def store_target(store_engine: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Where a test that restarts the bridge keeps its store: a SQLite file, or (Postgres pass) a fresh database."""
    yield from store_location(store_engine, tmp_path / "bridge.db", lambda: request.getfixturevalue("postgres"))


@pytest.fixture
def pg_url(postgres: PostgresCluster) -> Iterator[str]:
    """A fresh database in the session's Postgres."""
    url = postgres.create_database()
    yield url
    postgres.drop_database(url)


@pytest.fixture
async def host_stores(anyio_backend: object, store_engine: str, request: pytest.FixtureRequest) -> AsyncIterator[None]:
    """The stores of test hosts (`bridge.testing.host_store`): on Postgres in the Postgres pass (one fresh database
    per test); closed once the test has read them."""
    if store_engine == "postgres":
        HOST_STORES.target = request.getfixturevalue("store_target")
    try:
        yield
    finally:
        HOST_STORES.target = None
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


@pytest.fixture
async def llm() -> AsyncIterator[FakeLLMServer]:
    """A fake OpenAI/Anthropic HTTP server on a free port, for the agent and sampling; script it with `reply`."""
    server = FakeLLMServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


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
