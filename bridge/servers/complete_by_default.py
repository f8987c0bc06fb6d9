"""A tool result that names no `resultType` is a complete one, at the bridge's edge.

The 2026-07-28 protocol (SEP-2322) says a client MUST treat a result without `resultType` as `complete`; `mcp` 2.3.0
instead validates the 2026 result shape strictly and fails the call ("CallToolResult.resultType: Field required"),
so a server that leaves the field out (as the spec allows) could not be used at all. The session's transport is
wrapped here: a response to a `tools/call` the bridge sent that carries a result without `resultType` gets
`"resultType": "complete"` before the SDK sees it, whatever the SDK does about it. On a legacy (2025) session the
field is not part of the protocol and the SDK drops it again (it removes a later revision's fields), so the wrapper
is the same on both eras and changes nothing there.

Pure plumbing over the transport's two streams: the write side remembers the ids of `tools/call` requests, the read
side completes their answers. Nothing else is touched.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCRequest, JSONRPCResponse

COMPLETE = "complete"


def completed(message: Any, calls: set[Any]) -> Any:
    """The message as the session should see it: an answer to a remembered `tools/call` without `resultType` gets
    `complete`; anything else unchanged. Forgets the id once answered."""
    if not isinstance(message, SessionMessage):
        return message
    inner = message.message
    if not isinstance(inner, JSONRPCResponse) or inner.id not in calls:
        return message
    calls.discard(inner.id)
    if "resultType" in inner.result:
        return message
    fixed = inner.model_copy(update={"result": {**inner.result, "resultType": COMPLETE}})
    return dataclasses.replace(message, message=fixed)


def remember(message: Any, calls: set[Any]) -> None:
    if isinstance(message, SessionMessage):
        inner = message.message
        if isinstance(inner, JSONRPCRequest) and inner.method == "tools/call":
            calls.add(inner.id)


@asynccontextmanager
async def complete_by_default(transport: AbstractAsyncContextManager[Any]) -> AsyncIterator[Any]:
    """`transport` (an SDK client transport yielding its read and write streams) with tool results completed."""
    async with transport as streams, anyio.create_task_group() as tg:
        read, write = streams[0], streams[1]
        calls: set[Any] = set()
        read_in, read_out = anyio.create_memory_object_stream[Any](0)
        write_in, write_out = anyio.create_memory_object_stream[Any](0)

        async def inbound() -> None:
            async with read_in:
                try:
                    async for message in read:
                        await read_in.send(completed(message, calls))
                except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
                    pass  # either side closed: the session sees its stream end

        async def outbound() -> None:
            async with write_out:
                try:
                    async for message in write_out:
                        remember(message, calls)
                        await write.send(message)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                    pass
                finally:
                    await write.aclose()

        tg.start_soon(inbound)
        tg.start_soon(outbound)
        try:
            yield read_out, write_in
        finally:
            tg.cancel_scope.cancel()
            for stream in (write_in, read_out, read_in, write_out):
                await stream.aclose()
