"""A tool result without `resultType` reaches the session as `complete` (SEP-2322), through the transport wrapper.

The end-to-end case is the conformance scenario `sep-2322-client-request-state` (tests/conformance), whose server
answers one tool without `resultType`; here the wrapper's streams are driven directly."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCRequest, JSONRPCResponse

from bridge.servers.complete_by_default import complete_by_default
from tests.harness.hosts import patient

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def loop_transport(answers: dict[str, dict[str, Any]]) -> AsyncIterator[Any]:
    """A transport whose 'server' answers each request with the result given for its method."""
    to_server_in, to_server_out = anyio.create_memory_object_stream[Any](10)
    from_server_in, from_server_out = anyio.create_memory_object_stream[Any](10)

    async def server() -> None:
        async with to_server_out, from_server_in:
            async for message in to_server_out:
                request = message.message
                await from_server_in.send(SessionMessage(JSONRPCResponse(
                    jsonrpc="2.0", id=request.id, result=answers[request.method])))

    async with anyio.create_task_group() as tg, from_server_out, to_server_in:
        tg.start_soon(server)
        yield from_server_out, to_server_in
        tg.cancel_scope.cancel()


async def ask(streams: Any, method: str, ident: int | str) -> dict[str, Any]:
    read, write = streams
    await write.send(SessionMessage(JSONRPCRequest(jsonrpc="2.0", id=ident, method=method, params={})))
    answer = await read.receive()
    assert isinstance(answer.message, JSONRPCResponse)
    return answer.message.result


async def test_a_tool_result_without_result_type_is_complete_and_nothing_else_changes() -> None:
    answers: dict[str, dict[str, Any]] = {"tools/call": {"content": []}, "tools/list": {"tools": []}}
    with anyio.fail_after(patient(10)):
        async with complete_by_default(loop_transport(answers)) as streams:
            assert await ask(streams, "tools/call", 1) == {"content": [], "resultType": "complete"}
            assert await ask(streams, "tools/list", 2) == {"tools": []}  # only tool results are completed


async def test_a_result_type_the_server_names_is_kept() -> None:
    answers = {"tools/call": {"resultType": "input_required", "inputRequests": {}}}
    with anyio.fail_after(patient(10)):
        async with complete_by_default(loop_transport(answers)) as streams:
            assert (await ask(streams, "tools/call", "a"))["resultType"] == "input_required"
