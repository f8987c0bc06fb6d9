"""Shared fixtures: the asyncio backend (the SDK and adapters run on it), the npm MCP peers, a real Synapse and a real
PostgreSQL."""

from __future__ import annotations

import inspect
import io
import logging
import re
import types
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from bridge.cli.entry import setup_logging
from bridge.safety import redaction
from tests.harness.hosts import HOST_STORES, time_scale
from tests.harness.postgres import PostgresCluster, PostgresUnavailable, store_location
from tests.harness.synapse import Synapse
from tests.llm.fake_llm_server import FakeLLMServer

ROOT = Path(__file__).resolve().parent.parent
EVERYTHING = ROOT / "tests/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    # pytest-timeout's limit (pyproject's `timeout`, unless given on the command line) scales like every deadline a
    # test sets itself (tests.harness.hosts.patient), so a loaded machine never meets one before the other.
    if config.getoption("timeout", None) is None:
        config.option.timeout = float(config.getini("timeout")) * time_scale()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


FIXTURE_LANES = {"synapse": "synapse", "postgres": "postgres", "image": "image", "browser": "browser"}
"""The lane marker of a test that uses one of these fixtures (directly or through another fixture)."""
STARTS_A_PROCESS = re.compile(r"\bsubprocess\.(Popen|run|check_call|check_output)\b"
                              r"|\bopen_process\b|\bcreate_subprocess_")


def starts_processes(obj: object, known: dict[int, bool]) -> bool:
    """Whether a test function, fixture or harness starts processes of its own: its source, or that of a function or
    class of the test suite it names (followed through the names those use in turn), calls subprocess or
    `anyio.open_process`. stdio MCP servers the bridge starts through the SDK don't count: that code is not ours."""
    key = id(obj)
    if key in known:
        return known[key]
    known[key] = False  # while looking: a cycle adds nothing
    if isinstance(obj, type):
        parts: list[Any] = [v for v in vars(obj).values() if isinstance(v, types.FunctionType)]
    elif isinstance(obj, types.FunctionType):
        parts = [obj]
    else:
        return False
    found = False
    for function in parts:
        try:
            source = inspect.getsource(function)
        except (OSError, TypeError):
            continue
        if STARTS_A_PROCESS.search(source):
            found = True
            break
        for name in names_used(function.__code__):
            used = function.__globals__.get(name)
            if our_code(used) and starts_processes(used, known):
                found = True
                break
        if found:
            break
    known[key] = found
    return found


def names_used(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= names_used(const)
    return names


def our_code(obj: object) -> bool:
    return (isinstance(obj, (type, types.FunctionType))
            and str(getattr(obj, "__module__", "")).startswith(("tests.", "bench.")))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The lanes (pyproject's markers): put on by what a test uses, so `scripts/dev.sh test-fast` can leave out
    # what needs a homeserver, a database server, a browser, an image build or processes of its own, and what asked
    # for more time than the default. Marks written on a test by hand stay as they are.
    default_timeout = 120.0
    known: dict[int, bool] = {}
    for item in items:
        if not isinstance(item, pytest.Function):
            continue
        names = set(item.fixturenames)
        for fixture, lane in FIXTURE_LANES.items():
            if fixture in names:
                item.add_marker(lane)
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "postgres" in callspec.params.values():  # an engine parameter: its Postgres pass
            item.add_marker("postgres")
        timeout = item.get_closest_marker("timeout")
        if timeout is not None and timeout.args and float(timeout.args[0]) > default_timeout:
            item.add_marker("slow")
        fixtures = [defs[-1].func for name, defs in item._fixtureinfo.name2fixturedefs.items()
                    if defs and name not in FIXTURE_LANES]
        if any(starts_processes(inspect.unwrap(f), known) for f in (item.function, *fixtures)):
            item.add_marker("subprocess")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # `both_engines` (a module's `pytestmark`): every async test there runs twice, on SQLite and on Postgres (its
    # hosts' stores, `store_target`). The core and adapter tests that use the store carry it; the storage tests
    # choose their engines themselves, tests of several workers are Postgres only, and the CLI and Matrix tests keep
    # SQLite (they run whole processes or a homeserver, which a second pass would only make slower).
    # A test that restarts the bridge (`store_target`) has `store_engine` among its fixtures already: it gets both
    # passes too. A test that chose its engine itself (takes `store_engine` as an argument, or parametrizes it) is
    # left as it is.
    chosen = "store_engine" in inspect.signature(metafunc.function).parameters or any(
        "store_engine" in str(m.args[0]) for m in metafunc.definition.iter_markers("parametrize") if m.args)
    if (metafunc.definition.get_closest_marker("both_engines") is not None
            and inspect.iscoroutinefunction(metafunc.function) and not chosen):
        if "store_engine" not in metafunc.fixturenames:
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
    """The stores of test hosts (`tests.harness.hosts.host_store`): on Postgres in the Postgres pass (one fresh database
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
