"""Fixtures for the Matrix adapter tests: the session's Synapse (from tests/matrixhs) and the asyncio backend."""

from __future__ import annotations

import pytest

# Re-declared here so these tests share the one session-scoped Synapse of the harness.
from tests.matrixhs.conftest import synapse

__all__ = ["synapse"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # matrix-nio is asyncio-only
