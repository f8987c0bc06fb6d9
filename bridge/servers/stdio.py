"""The bridge's stdio transport: a server's process spawned as the SDK spawns it, and MCP's stdio framing (one
JSON-RPC message per line) spoken over its pipes, as `mcp.client.stdio.stdio_client` does, but with a line reader
linear in a line's length.

The SDK's reader adds each chunk of stdout to the part of a line seen so far and splits the whole again, so one long
line costs a pass over all of it per chunk: a 50 MB tool result took 97 to 188 s through it, against 3 s here
(`bench/big_result.py`). Servers started ahead of need (`bridge.servers.prestart`) are spoken to the same way.

A line is bounded by `limits.message_size` as it is read (`MessageBound`): past it, nothing more of the line is
kept, and the session's transport ends (see `adopted`).

The environment is the SDK's for stdio servers (only the variables in `INHERITED`, then the server's `env`), so a
server sees what it would under any SDK client; tests/bridge/test_prestart.py checks the list against the SDK's.
"""

from __future__ import annotations

import enum
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import IO, TYPE_CHECKING, Any

import anyio
from anyio.abc import Process

if TYPE_CHECKING:
    from bridge.config.file import ServerConfig
    from bridge.servers.message_bound import MessageBound

INHERITED = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")
"""The variables the SDK passes on to a stdio server (`mcp.client.stdio.DEFAULT_INHERITED_ENV_VARS` on POSIX)."""
STOP_GRACE = 2.0
"""Seconds a server has to exit once its stdin closes, then again after SIGTERM, before SIGKILL (the SDK's too)."""


def argv(cfg: ServerConfig) -> tuple[str, ...]:
    assert cfg.command is not None
    return (cfg.command, *cfg.args)


async def spawn(cfg: ServerConfig, stderr: IO[str]) -> Process:
    """The server's process, leading its own process group (so stopping it stops what it started). Raises OSError
    when it cannot be started."""
    env = {k: v for k in INHERITED if (v := os.environ.get(k)) is not None and not v.startswith("()")}
    return await anyio.open_process(list(argv(cfg)), env=env | dict(cfg.env), cwd=cfg.cwd, stderr=stderr,
                                    start_new_session=True)


@asynccontextmanager
async def spawned(cfg: ServerConfig, stderr: IO[str], bound: MessageBound | None = None) -> AsyncIterator[Any]:
    """A transport to a new process of this server, whose stderr goes to `stderr`."""
    process = await spawn(cfg, stderr)
    async with adopted(process, bound) as streams:
        yield streams


@asynccontextmanager
async def adopted(process: Process, bound: MessageBound | None = None) -> AsyncIterator[Any]:
    """An MCP client transport over a running server's stdin and stdout (what `mcp.client.stdio.stdio_client`
    yields for a process it spawns): messages are lines of JSON; at the end stdin is closed and the server stopped.

    A line longer than `bound.limit` ends the transport's read at once: the session sees its stream end, so every
    request in flight fails, and the pool reports the refusal and starts the server again on next use. Failing only
    the request the line answers would need its id, and the id is not reliably where it can be read without the
    whole line: the TypeScript SDK writes it after the result, and the line may be a request or a notification of
    the server's, which answers nothing. A guessed id could fail someone else's call, and a request left unanswered
    waits forever (there is no read timeout: people answer forms meanwhile). A server that sends such a line is
    misbehaving; a clean restart is the safe answer."""
    from mcp.shared.message import SessionMessage

    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout
    read_in, read_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_in, write_out = anyio.create_memory_object_stream[SessionMessage](0)

    async def reader() -> None:
        lines = LineSplitter(bound.limit if bound is not None else None)
        async with read_in:
            try:
                async for chunk in stdout:
                    for line in lines.feed(chunk):
                        if line is TOO_LONG:
                            assert bound is not None
                            bound.refuse(closed=True)
                            return  # closing the read stream fails every request in flight with "Connection closed"
                        try:
                            message: SessionMessage | Exception = SessionMessage(parse_line(line))
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
                await stop(process)
                await read_out.aclose()
            tg.cancel_scope.cancel()


class Overflow(enum.Enum):
    TOO_LONG = "too long"
    """What `LineSplitter.feed` gives, in place of a line, when the line passes its limit."""


TOO_LONG = Overflow.TOO_LONG


class LineSplitter:
    """Lines out of chunks, linear in their size: each chunk is searched once, and a line grows in one buffer that is
    handed out as it is (never joined, so a long line is never held twice). Adding each chunk to the part of a line
    seen so far and splitting it all again (what the SDK's stdio reader does) copies and searches a long line once
    per chunk: a 50 MB result in 64 KB chunks is 800 passes over up to 50 MB.

    With a `limit`, a line is kept only up to it: the moment it passes, what was kept is dropped, `TOO_LONG` is
    given once, and the rest of the line is skipped up to its newline. So it holds at most `limit` bytes (and one
    chunk), however long the line."""

    def __init__(self, limit: int | None = None) -> None:
        self._line = bytearray()
        self._limit = limit
        self._skipping = False

    def feed(self, chunk: bytes) -> list[bytearray | Overflow]:
        """The lines this chunk ends (without their newline), `TOO_LONG` for one that passed the limit; the rest
        waits for the next chunk. A line is the buffer it was read into: its reader may `clear()` it to let its
        memory go while other references to it live on."""
        lines: list[bytearray | Overflow] = []
        view = memoryview(chunk)
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if not self._skipping and self._fits(end - start, lines):
                self._line += view[start:end]
                lines.append(self._line)
            self._skipping = False  # the newline ends the line, kept or not
            self._line = bytearray()
            start = end + 1
        if start < len(chunk) and not self._skipping and self._fits(len(chunk) - start, lines):
            self._line += view[start:]
        return lines

    @property
    def held(self) -> int:
        """Bytes of the unfinished line kept so far."""
        return len(self._line)

    def _fits(self, more: int, lines: list[bytearray | Overflow]) -> bool:
        if self._limit is None or len(self._line) + more <= self._limit:
            return True
        self._line = bytearray()
        self._skipping = True
        lines.append(TOO_LONG)
        return False


def parse_line(line: bytearray) -> Any:
    """One line as a JSON-RPC message (`mcp.types.JSONRPCMessage`); ValueError when it is not one.

    Decoded, the line's buffer emptied, parsed by the standard library, then validated from those values: at most
    two copies of the line's size are held at once, and the message keeps one. Measured on a 32 MB line, above the
    line itself: 32 MB this way; 81 MB with pydantic-core's `from_json` on the bytes; 193 MB with the SDK's way,
    `validate_json` on the line, which builds the message through a tree of its own (`bench/big_result.py`)."""
    import json

    from mcp.types import jsonrpc_message_adapter

    try:
        text = line.decode("utf-8")
    finally:
        line.clear()
    data = json.loads(text)
    del text  # before the message is built: its values are all it needs
    return jsonrpc_message_adapter.validate_python(data, by_name=False)


async def stop(process: Process) -> None:
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
