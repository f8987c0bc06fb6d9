"""Stdio servers started before the bridge has loaded the MCP SDK, so that their start overlaps the bridge's own.

Loading the SDK is most of the bridge's start, and a Python MCP server spends about as long loading it on its side:
one after the other, the first card of such a server comes after both. `run` therefore spawns the servers marked
`prestart: true` first thing, with nothing but anyio loaded, and imports the SDK while they start on another core.
The first session of each server then adopts its process (`SessionPool` asks `take`) instead of spawning one: it
speaks MCP's stdio framing over the process's pipes (`bridge.servers.stdio.adopted`).
A process nobody adopted is stopped when the bridge stops.

The process is spawned and spoken to by `bridge.servers.stdio`, as every stdio server is, so a server behaves the same
adopted or not.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING

import anyio
from anyio.abc import Process

from bridge.servers.stdio import argv, spawn, stop

if TYPE_CHECKING:
    from bridge.config.file import ServerConfig

logger = logging.getLogger(__name__)


@dataclass
class Prestarted:
    server: str
    process: Process
    stderr: IO[str]


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
            stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
            try:
                process = await spawn(cfg, stderr)
            except OSError as exc:
                stderr.close()
                logger.warning("could not start %s ahead of use: %s", cfg.name, exc)
                continue
            self._waiting[cfg.name] = (argv(cfg), Prestarted(cfg.name, process, stderr))

    def take(self, cfg: ServerConfig) -> Prestarted | None:
        """The process started for this server, if it is still running and runs what is configured."""
        waiting = self._waiting.pop(cfg.name, None)
        if waiting is None:
            return None
        spawned_as, started = waiting
        if spawned_as != argv(cfg) or started.process.returncode is not None:
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
                await stop(started.process)
                started.stderr.close()
