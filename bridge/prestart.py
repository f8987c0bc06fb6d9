"""Stdio servers started before the bridge has loaded the MCP SDK, so that their start overlaps the bridge's own.

Loading the SDK is most of the bridge's start, and a Python MCP server spends about as long loading it on its side:
one after the other, the first card of such a server comes after both. `run` therefore spawns the servers marked
`prestart: true` first thing, with nothing but anyio loaded, and imports the SDK while they start on another core.
The first session of each server then adopts its process (`SessionPool` asks `take`) instead of spawning one: it
speaks MCP's stdio framing (one JSON-RPC message per line) over the process's pipes, as the SDK's stdio client does.
A process nobody adopted is stopped when the bridge stops.

The environment is the SDK's for stdio servers (only the variables in `INHERITED`, then the server's `env`), so a
server behaves the same adopted or not; tests/bridge/test_prestart.py checks the list against the SDK's.
"""

from __future__ import annotations

import logging
import os
import signal
import tempfile
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

import anyio
from anyio.abc import Process

if TYPE_CHECKING:
    from bridge.config import ServerConfig

logger = logging.getLogger(__name__)

INHERITED = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")
"""The variables the SDK passes on to a stdio server (`mcp.client.stdio.DEFAULT_INHERITED_ENV_VARS` on POSIX)."""
STOP_GRACE = 2.0
"""Seconds a server has to exit once its stdin closes, then again after SIGTERM, before SIGKILL (the SDK's too)."""


@dataclass
class Prestarted:
    server: str
    process: Process
    stderr: IO[str]


def _argv(cfg: ServerConfig) -> tuple[str, ...]:
    assert cfg.command is not None
    return (cfg.command, *cfg.args)


class Prestarts:
    """The processes spawned ahead of need, one per server, until a session takes each."""

    def __init__(self) -> None:
        self._waiting: dict[str, tuple[tuple[str, ...], Prestarted]] = {}
        self._unused: list[Prestarted] = []

    async def start(self, servers: Iterable[ServerConfig]) -> None:
        """Spawn every server marked `prestart` (stdio, enabled). A spawn that fails is logged: the session that
        needs the server spawns it again and reports the failure where it is used."""
        for cfg in servers:
            if not (cfg.prestart and cfg.command and not cfg.disabled):
                continue
            env = {k: v for k in INHERITED if (v := os.environ.get(k)) is not None and not v.startswith("()")}
            stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
            try:
                process = await anyio.open_process(list(_argv(cfg)), env=env | dict(cfg.env), cwd=cfg.cwd,
                                                   stderr=stderr, start_new_session=True)
            except OSError as exc:
                stderr.close()
                logger.warning("could not start %s ahead of use: %s", cfg.name, exc)
                continue
            self._waiting[cfg.name] = (_argv(cfg), Prestarted(cfg.name, process, stderr))

    def take(self, cfg: ServerConfig) -> Prestarted | None:
        """The process started for this server, if it is still running and runs what is configured."""
        waiting = self._waiting.pop(cfg.name, None)
        if waiting is None:
            return None
        argv, started = waiting
        if argv != _argv(cfg) or started.process.returncode is not None:
            self._unused.append(started)
            return None
        return started

    async def aclose(self) -> None:
        """Stop what nobody adopted."""
        left = [p for _, p in self._waiting.values()] + self._unused
        self._waiting.clear()
        self._unused.clear()
        with anyio.CancelScope(shield=True):
            for started in left:
                await _stop(started.process)
                started.stderr.close()


@asynccontextmanager
async def adopted(started: Prestarted) -> AsyncIterator[Any]:
    """An MCP client transport over a running server's stdin and stdout (what `mcp.client.stdio.stdio_client`
    yields for a process it spawns): messages are lines of JSON; at the end stdin is closed and the server stopped."""
    from mcp.shared.message import SessionMessage
    from mcp.types import jsonrpc_message_adapter

    process = started.process
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout
    read_in, read_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_in, write_out = anyio.create_memory_object_stream[SessionMessage](0)

    async def reader() -> None:
        lines = LineSplitter()
        async with read_in:
            try:
                async for chunk in stdout:
                    for line in lines.feed(chunk):
                        try:
                            message: SessionMessage | Exception = SessionMessage(
                                jsonrpc_message_adapter.validate_json(line, by_name=False))
                        except ValueError as exc:  # the session reports a line that is not a message
                            message = exc
                        await read_in.send(message)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError):
                pass  # the server closed its stdout, or we are stopping: the session sees the stream end

    async def writer() -> None:
        async with write_out:
            try:
                async for message in write_out:
                    text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await stdin.send((text + "\n").encode())
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                await read_in.aclose()  # the server is gone: end the session's read instead of leaving it hanging

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        try:
            yield read_out, write_in
        finally:
            with anyio.CancelScope(shield=True):
                await write_in.aclose()
                await _stop(process)
                await read_out.aclose()
            tg.cancel_scope.cancel()


class LineSplitter:
    """Lines out of chunks, linear in their size: each chunk is searched once and a line is joined once. Adding each
    chunk to the part of a line seen so far and splitting it all again (what the SDK's stdio reader does) copies and
    searches a long line once per chunk: a 50 MB result in 64 KB chunks is 800 passes over up to 50 MB."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines this chunk ends (without their newline); the rest waits for the next chunk."""
        lines: list[bytes] = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            self._parts.append(chunk[start:end])
            lines.append(b"".join(self._parts))
            self._parts.clear()
            start = end + 1
        if start < len(chunk):
            self._parts.append(chunk[start:])
        return lines


async def _stop(process: Process) -> None:
    """Close stdin and let the server exit; SIGTERM, then SIGKILL, to its process group if it does not."""
    with anyio.CancelScope(shield=True):
        if process.stdin is not None:
            await process.stdin.aclose()
        for sent in (None, signal.SIGTERM, signal.SIGKILL):
            if sent is not None and process.returncode is None:
                try:
                    os.killpg(process.pid, sent)  # the server's whole group: it leads its own session
                except ProcessLookupError:
                    break
            with anyio.move_on_after(STOP_GRACE):
                await process.wait()
                break
        await process.aclose()
