"""Fixtures for the Matrix adapter tests: the asyncio backend (the session's Synapse is in tests/conftest.py)."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # matrix-nio is asyncio-only
