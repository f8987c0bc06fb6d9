"""How a session reaches its server, and in which protocol mode the SDK connects.

In process (the demo and tests), streamable HTTP (with the account's OAuth where the server has an `auth:` block), or
stdio (`bridge.stdio`): a process `run` started ahead of need when there is one (`bridge.prestart`), else a new one
whose stderr is kept for error messages.
"""

from __future__ import annotations

import tempfile
from contextlib import AsyncExitStack
from typing import IO, Any

import httpx2
from mcp.client.streamable_http import streamable_http_client

from bridge import stdio
from bridge.config import ServerConfig
from bridge.prestart import Prestarts


async def open_transport(cfg: ServerConfig, stack: AsyncExitStack, auth: httpx2.Auth | None,
                         prestarts: Prestarts | None) -> tuple[Any, IO[str] | None]:
    """The SDK client's target for this server, and the file its stderr goes to (stdio servers only)."""
    if cfg.inprocess is not None:
        return cfg.inprocess, None
    if cfg.url:
        # No read timeout: a legacy server keeps the response stream quiet while a person answers a form.
        # The OAuth flow (if any) pauses the SDK's request clock itself while a person signs in.
        http = await stack.enter_async_context(
            httpx2.AsyncClient(headers=dict(cfg.headers), timeout=httpx2.Timeout(30.0, read=None), auth=auth))
        return streamable_http_client(cfg.url, http_client=http), None
    assert cfg.command is not None
    if prestarts is not None and (started := prestarts.take(cfg)) is not None:
        return stdio.adopted(started.process), started.stderr
    stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
    # The bridge's own stdio transport, not the SDK's: its reader is linear in a message's length (bridge.stdio).
    return stdio.spawned(cfg, stderr), stderr


def client_mode(protocol: str) -> Any:
    """The SDK's connect mode: a pin to 2026-07-28 negotiates like `auto` (a -32022 unsupported-version answer is
    retried at a version the server names); the pool then refuses a server that turned out to be legacy."""
    return "auto" if protocol == "2026-07-28" else protocol
