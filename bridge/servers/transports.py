"""How a session reaches its server, and in which protocol mode the SDK connects.

In process (the demo and tests), streamable HTTP (with the account's OAuth where the server has an `auth:` block), or
stdio (`bridge.servers.stdio`): a process `run` started ahead of need when there is one (`bridge.servers.prestart`),
else a new one whose stderr is kept for error messages.

A tool result without `resultType` is completed on every transport (`bridge.servers.complete_by_default`).

Every transport reads a server's messages within `limits.message_size` (`bridge.servers.message_bound`): a stdio line in
`bridge.servers.stdio`; an HTTP response body, or each server-sent event of a streamed one, here.
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import IO, Any

import httpx2
from mcp.client.streamable_http import streamable_http_client

from bridge.config.file import ServerConfig
from bridge.servers import stdio
from bridge.servers.complete_by_default import complete_by_default
from bridge.servers.message_bound import EventSizes, MessageBound
from bridge.servers.prestart import Prestarts


async def open_transport(cfg: ServerConfig, stack: AsyncExitStack, auth: httpx2.Auth | None,
                         prestarts: Prestarts | None, bound: MessageBound) -> tuple[Any, IO[str] | None]:
    """The SDK client's target for this server, and the file its stderr goes to (stdio servers only)."""
    if cfg.inprocess is not None:
        return cfg.inprocess, None
    if cfg.url:
        # No read timeout: a legacy server keeps the response stream quiet while a person answers a form.
        # The OAuth flow (if any) pauses the SDK's request clock itself while a person signs in.
        # Bodies uncompressed (identity), so the bytes counted are the bytes held (see `bounded`).
        http = await stack.enter_async_context(
            httpx2.AsyncClient(headers={"Accept-Encoding": "identity", **cfg.headers}, auth=auth,
                               timeout=httpx2.Timeout(30.0, read=None), event_hooks={"response": [bounded(bound)]}))
        # The SDK's own bound on an event is kept at the same size; ours counts first and says what happened.
        return complete_by_default(streamable_http_client(cfg.url, http_client=http, max_sse_event_size=bound.limit)), \
            None
    assert cfg.command is not None
    if prestarts is not None and (started := prestarts.take(cfg)) is not None:
        return complete_by_default(stdio.adopted(started.process, bound)), started.stderr
    stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
    # The bridge's own stdio transport, not the SDK's: its reader is linear in a message's length
    # (bridge.servers.stdio).
    return complete_by_default(stdio.spawned(cfg, stderr, bound)), stderr


class Refused(httpx2.SSEError, httpx2.StreamError):
    """A response body or event past the bound. Both kinds of httpx error, for the two places the SDK reads a
    response: a JSON body (it answers the request with a parse error carrying this text on `StreamError`) and an
    event stream (it answers the request with "SSE stream failed" and this text on `SSEError`). Either way only that
    request fails, and its error carries the refusal's words (`MessageBound.explains`)."""


def bounded(bound: MessageBound) -> Any:
    """An httpx response hook: the response's body is read through `_BoundedBody`. A hook, not a transport, so it
    holds whatever transport httpx picks (proxies from the environment included)."""
    async def hook(response: httpx2.Response) -> None:
        # An encoding not asked for (identity was) is left undecoded: the SDK sees bytes it cannot parse and fails
        # the request, instead of the bridge inflating a small body into a huge one.
        response.headers.pop("Content-Encoding", None)
        events = response.headers.get("Content-Type", "").lower().startswith("text/event-stream")
        length = response.headers.get("Content-Length", "")
        response.stream = _BoundedBody(response.stream, bound, events, int(length) if length.isdigit() else None)
    return hook


class _BoundedBody(httpx2.AsyncByteStream):
    """A response body that ends with `Refused` before it passes the bound: the whole body, or each event of an
    event stream (a long-lived stream may carry any number of events; each is one message)."""

    def __init__(self, inner: Any, bound: MessageBound, events: bool, length: int | None) -> None:
        self._inner = inner
        self._bound = bound
        self._events = events
        self._length = length

    async def __aiter__(self) -> AsyncIterator[bytes]:
        limit = self._bound.limit
        if not self._events and self._length is not None and self._length > limit:
            raise Refused(self._bound.refuse(self._length, closed=False))
        sizes = EventSizes() if self._events else None
        read = 0
        async for chunk in self._inner:
            read = sizes.feed(chunk) if sizes is not None else read + len(chunk)
            if read > limit:
                raise Refused(self._bound.refuse(closed=False))
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


def client_mode(protocol: str) -> Any:
    """The SDK's connect mode: a pin to 2026-07-28 negotiates like `auto` (a -32022 unsupported-version answer is
    retried at a version the server names); the pool then refuses a server that turned out to be legacy."""
    return "auto" if protocol == "2026-07-28" else protocol
