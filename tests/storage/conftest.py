"""The store on both engines: every test taking `store` (or `target`) runs on SQLite and on a real Postgres."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bridge.storage import SqlStore, open_store
from tests.harness.postgres import PostgresCluster, store_location

ENGINES = ["sqlite", "postgres"]


@pytest.fixture(params=ENGINES)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Where a store lives: a SQLite file in a temp folder, or a fresh database in the session's Postgres."""
    yield from store_location(request.param, tmp_path / "bridge.db", lambda: request.getfixturevalue("postgres"))


@pytest.fixture
def engine(target: str) -> str:
    return "postgres" if target.startswith("postgresql://") else "sqlite"


@pytest.fixture
async def store(target: str) -> AsyncIterator[SqlStore]:
    opened = await open_store(target, worker_id="w1")
    try:
        yield opened
    finally:
        await opened.aclose()


@pytest.fixture
def pg_target(postgres: PostgresCluster) -> Iterator[str]:
    """A fresh Postgres database, for what only several workers do."""
    url = postgres.create_database()
    yield url
    postgres.drop_database(url)


@pytest.fixture
async def pg_store(pg_target: str) -> AsyncIterator[SqlStore]:
    opened = await open_store(pg_target, worker_id="w1")
    try:
        yield opened
    finally:
        await opened.aclose()


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[SqlStore]:
    opened = await open_store(tmp_path / "bridge.db", worker_id="w1")
    try:
        yield opened
    finally:
        await opened.aclose()
