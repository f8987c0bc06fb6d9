"""A server that dies (or refuses a message as too large) during a call: the MCP request's failure turned into one of
the bridge's errors, and the session dropped from the pool so the next call starts a fresh one."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import anyio
from mcp import MCPError

from bridge.errors import CONNECTION_CLOSED, MessageTooLarge, ServerGoneError
from bridge.servers.mcp_session import Session
from bridge.servers.sessions import SessionPool


async def guarded(pool: SessionPool, session: Session, request: Awaitable[Any]) -> Any:
    """Await an MCP request, turning a dead connection into ServerGoneError and dropping the session, and a message
    the transport refused (`limits.message_size`) into MessageTooLarge."""
    try:
        return await request
    except MCPError as exc:
        if (refused := _refused(pool, session, exc.error.message)) is not None:
            raise refused from exc
        if exc.code == CONNECTION_CLOSED:
            raise gone(pool, session, exc) from exc
        raise
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream) as exc:
        raise gone(pool, session, exc) from exc


def _refused(pool: SessionPool, session: Session, message: str) -> MessageTooLarge | None:
    refused = session.bound.explains(message) if session.bound is not None else None
    if refused is not None and refused.restarts:
        pool.mark_gone(session, str(refused))
    return refused


def gone(pool: SessionPool, session: Session, exc: BaseException) -> ServerGoneError | MessageTooLarge:
    if (refused := _refused(pool, session, str(exc))) is not None:
        return refused
    tail = session.stderr_tail()
    pool.mark_gone(session, str(exc) or type(exc).__name__)
    return ServerGoneError(session.server.name, f"{session.server.name} stopped during the call", tail)
