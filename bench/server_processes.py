"""N conversations each calling one tool of a stdio server once: how many server processes, and how much memory.

The server is the bundled demo server over stdio (`python -m bridge.cli.demo.server`); each conversation calls its
`echo` tool once, all at the same time, through a real `Host` (session pool, stdio transport, store in memory) with a
fake chat port. Once every call has answered (sessions still open: nothing has gone idle yet), it counts the bridge's
child processes running the server and sums their USS (memory only they hold, psutil `memory_full_info`).

The unit is the bare server: the same command started by a bare `mcp.Client` over the SDK's stdio transport, called
once, measured the same way in the same process. Both eras: `legacy` (2025-11-25: a session, so a process, per
conversation) and `2026` (`protocol: auto`, which this server answers with 2026-07-28: the pool's sessions, as calls
run at once, up to `sessions.pool_size`).

    .venv/bin/python -m bench.server_processes                      # 20 and 200 conversations, 2026; 20 legacy
    .venv/bin/python -m bench.server_processes --n 20 --eras legacy,2026 --runs 3
    .venv/bin/python -m bench.server_processes --n 200 --eras legacy --legacy-max 200   # ~9 GiB of servers
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from dataclasses import dataclass
from pathlib import Path

import anyio
import psutil

from bench.common import quiet_logs
from bridge.config.file import Config, ServerConfig
from bridge.door.model import ConversationKey
from tests.harness.hosts import ALICE, config_for, host_for

ROOT = Path(__file__).resolve().parents[1]
MODULE = "bridge.cli.demo.server"
ERAS = {"legacy": "legacy", "2026": "auto"}
MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Figures:
    processes: int
    uss: int
    """Bytes, summed over the server processes."""


def server_processes() -> list[psutil.Process]:
    """This process's children running the demo server."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if MODULE in " ".join(child.cmdline()):
                found.append(child)
        except psutil.Error:
            continue
    return found


def measure() -> Figures:
    processes = server_processes()
    uss = 0
    for process in processes:
        try:
            uss += process.memory_full_info().uss
        except psutil.Error:
            continue
    return Figures(len(processes), uss)


def server_env() -> dict[str, str]:
    # A sealing key from the environment: the demo server would otherwise make a key file in the state folder.
    return {"MCP_CHAT_BRIDGE_DEMO_KEY": KEY}


KEY = secrets.token_hex(32)


async def bare() -> Figures:
    """The unit: one bare server process behind a bare SDK client, after one call."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", MODULE], cwd=str(ROOT), env=server_env())
    async with Client(params) as client:
        await client.call_tool("echo", {"message": "hi"})
        return measure()


async def bridged(era: str, n: int) -> Figures:
    server = ServerConfig(name="demo", command=sys.executable, args=("-m", MODULE), cwd=str(ROOT), env=server_env(),
                          protocol=ERAS[era])  # type: ignore[arg-type]
    config: Config = config_for({"demo": server}, max_sessions=max(200, n))
    host, _ = await host_for(config)
    conversations = [ConversationKey("bench", "W1", "C1", f"T{i}") for i in range(n)]
    answered: list[bool] = []

    async def one(conversation: ConversationKey) -> None:
        result = await host.calls.run(conversation, ALICE, "demo", "echo", {"message": conversation.thread})
        answered.append(result is not None and not result.is_error)

    async with host:
        async with anyio.create_task_group() as tg:
            for conversation in conversations:
                tg.start_soon(one, conversation)
        if len(answered) != n or not all(answered):
            raise SystemExit(f"{era}, {n}: {answered.count(True)} of {n} calls answered")
        return measure()


def row(label: str, figures: Figures, unit: Figures) -> str:
    units = figures.uss / unit.uss if unit.uss else float("nan")
    return (f"{label:<26} {figures.processes:>9} {figures.uss / MIB:>10.1f} {units:>14.2f}"
            f" {figures.uss / max(figures.processes, 1) / MIB:>14.1f}")


async def run(ns: list[int], eras: list[str], runs: int, legacy_max: int) -> None:
    print(f"{'':<26} {'processes':>9} {'USS MiB':>10} {'bare servers':>14} {'MiB/process':>14}")
    for number in range(1, runs + 1):
        unit = await bare()
        print(row(f"run {number}: bare server", unit, unit))
        for era in eras:
            for n in ns:
                if era == "legacy" and n > legacy_max:
                    print(f"  {era}, {n} conversations: skipped (a process each; --legacy-max {n} to run it)")
                    continue
                print(row(f"  {era}, {n} conversations", await bridged(era, n), unit), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--n", type=int, nargs="+", default=None, help="conversations (default: 20 200)")
    parser.add_argument("--eras", default="2026,legacy", help="legacy, 2026 or both (comma-separated)")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--legacy-max", type=int, default=20,
                        help="legacy rows with more conversations are skipped (each starts a server process)")
    args = parser.parse_args()
    quiet_logs()
    os.chdir(ROOT)
    eras = [e for e in args.eras.split(",") if e]
    for era in eras:
        if era not in ERAS:
            parser.error(f"unknown era {era!r}: legacy or 2026")
    anyio.run(run, args.n or [20, 200], eras, args.runs, args.legacy_max, backend="asyncio")


if __name__ == "__main__":
    main()
