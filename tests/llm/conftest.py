"""Fixtures for the LLM layer: one fake provider HTTP server per test module."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from tests.llm.fake_llm_server import FakeLLMServer


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    # Module scope, so the module-scoped server fixture shares the tests' event loop.
    return "asyncio"


@pytest.fixture(scope="module")
async def llm_server() -> AsyncIterator[FakeLLMServer]:
    server = FakeLLMServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
def fake(llm_server: FakeLLMServer) -> Iterator[FakeLLMServer]:
    """The module's server with no scripted replies and no recorded requests."""
    llm_server.reset()
    yield llm_server
    assert not llm_server.pending_replies, f"replies never requested: {llm_server.pending_replies}"
