"""Session-scoped Synapse for the Matrix integration tests (one server, unique users per test)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.matrixhs.synapse import Synapse


@pytest.fixture(scope="session")
def synapse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synapse]:
    # A pytest-managed workdir keeps the config, database and logs of a failed run.
    with Synapse(tmp_path_factory.mktemp("synapse")) as server:
        yield server
