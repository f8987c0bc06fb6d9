"""A huge tool result (default 50 MB) from a real stdio server: where the time and the memory go.

Each figure is a fresh child process (so its peak RSS is its own), calling one tool, `big(size)`, of an SDK
`MCPServer` run over stdio by this module (`--serve`). `--shape text` (the default): the result is `size` characters of
text, once, in one JSON-RPC line of about `size` bytes. `--shape twice`: the tool declares its output, so the SDK puts
the same text in the structured content as well (as the spec asks of a tool with an output schema): one line of about
twice `size`. The figures of the "lean where it counts" issue before this option were taken with `twice`.

- **sdk**: a bare `mcp.Client` over stdio calls the tool (the SDK's transport and session, nothing of the bridge);
- **bridge**: the bridge's `Host` with the same server configured as a stdio command and a fake chat port: `call
  big big {...}` in a conversation until the result's message is posted (session pool, tool calls, the kept result
  and its chat message);
- **adopted**: the same bare `mcp.Client`, over the bridge's own stdio transport (`bridge.servers.prestart.adopted`,
  what a server marked `prestart: true` is read through) instead of the SDK's: the same server, another line reader;
- **bridge-prestart**: the bridge as in **bridge**, with the server marked `prestart: true` (so read by
  `bridge.servers.prestart`);
  (these two raise `limits.message_size` to fit the result: they measure reading it, not refusing it)
- **bridge-refused**: the bridge as in **bridge** with the default limits, the result `--refused-mb` MB (default 150):
  one line past `limits.message_size`, refused as it is read, until the notice is posted;
- **bridge-idle**: the same bridge calling for 1 KB: the baseline for **bridge-refused**'s memory;
- **reader**: no process and no server: the SDK stdio reader's loop (`(buffer + chunk).split("\\n")` per chunk of
  `TextReceiveStream`, 64 KB from anyio) over the same line cut into 64 KB chunks, beside a linear reader (chunks
  collected until a newline, joined once): the CPU the reader alone spends on one long line.

Wall time of the child (spawn to exit, server start included) and the child's peak RSS (`ru_maxrss`, the server
process not included) are printed per run, then the median.

    .venv/bin/python -m bench.big_result                    # 50 MB, 3 runs of each
    .venv/bin/python -m bench.big_result --mb 10 --runs 5 --only sdk,reader
    .venv/bin/python -m bench.big_result --only bridge-idle,bridge-refused   # a 150 MB line refused
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

CHUNK = 65536
"""What anyio's `ByteReceiveStream.receive()` returns at most, so what the SDK's reader gets per iteration."""


def serve(shape: str) -> None:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("big", log_level="WARNING")

    @server.tool(structured_output=shape == "twice")
    def big(size: int) -> str:
        """`size` characters of text on 100-character lines."""
        return ("x" * 99 + "\n") * (size // 100) + "x" * (size % 100)

    server.run("stdio")


SHAPES = ("text", "twice")


def server_command() -> tuple[str, list[str]]:
    return sys.executable, ["-m", "bench.big_result", "--serve", "--shape", _shape]


_shape = "text"
"""The child's `--shape`, for `server_command` (set once, from the command line, before anything runs)."""


async def sdk(size: int) -> int:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.types import TextContent

    command, args = server_command()
    async with Client(StdioServerParameters(command=command, args=args)) as client:
        result = await client.call_tool("big", {"size": size})
    first = result.content[0]
    assert isinstance(first, TextContent)
    return len(first.text)


async def adopted(size: int) -> int:
    from mcp import Client
    from mcp.types import TextContent

    from bridge.config.file import ServerConfig
    from bridge.servers.prestart import Prestarts
    from bridge.servers.stdio import adopted as adopted_transport

    command, args = server_command()
    cfg = ServerConfig(name="big", command=command, args=tuple(args), prestart=True)
    prestarts = Prestarts()
    await prestarts.start([cfg])
    started = prestarts.take(cfg)
    assert started is not None
    async with Client(adopted_transport(started.process)) as client:
        result = await client.call_tool("big", {"size": size})
    started.stderr.close()
    first = result.content[0]
    assert isinstance(first, TextContent)
    return len(first.text)


async def bridge(size: int, prestart: bool = False, refused: bool = False) -> int:
    import anyio

    from bridge.config.file import ServerConfig
    from bridge.door.model import MessageIn
    from bridge.safety.limits import Limits
    from tests.harness.hosts import ALICE, ROOM, config_for, host_for

    command, args = server_command()
    from bridge.servers.prestart import Prestarts

    server = ServerConfig(name="big", command=command, args=tuple(args), protocol="legacy", tool_timeout=3600,
                          prestart=prestart)
    # Room for the whole message (the result twice with `--shape twice`), unless it is to be refused.
    limits = Limits() if refused else Limits(message_size=2 * size + 1024**2)
    prestarts = Prestarts()
    await prestarts.start([server])
    host, chat = await host_for(config_for({"big": server}, limits=limits), prestarts=prestarts)
    async with host:
        text = f"call big big {json.dumps({'size': size})}"
        await host.handle_message(MessageIn(ROOM, ALICE, text, explicit_command=True))
        with anyio.fail_after(3600):
            message = await chat.wait_message("limits.message_size" if refused else "big.big:")
    await prestarts.aclose()
    assert ("refused" in message) if refused else ("show " in message or size < 4096), message[-300:]
    return len(message)


async def bridge_prestart(size: int) -> int:
    return await bridge(size, prestart=True)


async def bridge_refused(size: int) -> int:
    return await bridge(size, refused=True)


async def bridge_idle(size: int) -> int:
    return await bridge(1024)


def reader(size: int) -> dict[str, float]:
    line = '{"jsonrpc":"2.0","id":1,"result":{"text":"' + "x" * size + '"}}\n'
    chunks = [line[i:i + CHUNK] for i in range(0, len(line), CHUNK)]
    started = time.perf_counter()
    buffer, lines = "", []
    for chunk in chunks:  # the SDK's loop (mcp/client/stdio.py, stdout_reader)
        parts = (buffer + chunk).split("\n")
        buffer = parts.pop()
        lines += parts
    sdk_s = time.perf_counter() - started
    assert len(lines) == 1 and len(lines[0]) == len(line) - 1
    started = time.perf_counter()
    pending: list[str] = []
    lines = []
    for chunk in chunks:  # linear: only the new chunk is searched; the line is joined once
        while "\n" in chunk:
            head, chunk = chunk.split("\n", 1)
            lines.append("".join([*pending, head]))
            pending = []
        if chunk:
            pending.append(chunk)
    linear_s = time.perf_counter() - started
    assert len(lines) == 1 and len(lines[0]) == len(line) - 1
    return {"sdk_reader_s": sdk_s, "linear_reader_s": linear_s, "chunks": len(chunks)}


def child(kind: str, size: int, shape: str) -> None:
    import logging

    import anyio

    global _shape
    _shape = shape
    logging.disable(logging.WARNING)
    figures: dict[str, Any]
    if kind == "reader":
        figures = reader(size)
    else:
        started = time.perf_counter()
        runs = {"sdk": sdk, "adopted": adopted, "bridge": bridge, "bridge-prestart": bridge_prestart,
                "bridge-refused": bridge_refused, "bridge-idle": bridge_idle}
        length = anyio.run(runs[kind], size)
        figures = {"seconds": time.perf_counter() - started, "length": length}
    figures["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(figures))


def run(kind: str, size: int, shape: str) -> dict[str, Any]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "bench.big_result", "--child", kind, "--size", str(size),
                           "--shape", shape],
                          capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{kind} failed:\n{done.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    figures["wall_s"] = time.perf_counter() - started
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--mb", type=float, default=50.0)
    parser.add_argument("--refused-mb", type=float, default=150.0, help="the result bridge-refused asks for")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default="sdk,adopted,bridge,bridge-prestart,bridge-idle,bridge-refused,reader")
    parser.add_argument("--shape", choices=SHAPES, default="text",
                        help="text: the result once in its message (default); twice: also as structured content")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve(args.shape)
    if args.child:
        return child(args.child, args.size, args.shape)
    size = int(args.mb * 1024**2)
    carried = "once (text)" if args.shape == "text" else "twice (text and structured content)"
    print(f"tool result of {size} characters ({args.mb:g} MB) carried {carried} in its message, {args.runs} runs "
          f"each, python {sys.version.split()[0]}")
    peaks: dict[str, list[float]] = {}
    for kind in args.only.split(","):
        results = [run(kind, int(args.refused_mb * 1024**2) if kind == "bridge-refused" else size, args.shape)
                   for _ in range(args.runs)]
        for n, r in enumerate(results, 1):
            print(f"  {kind:15} run {n}: " + ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}"
                                                     for k, v in r.items()))
        keys = [k for k, v in results[0].items() if isinstance(v, float)]
        print(f"  {kind:15} median: " + ", ".join(f"{k} {statistics.median(r[k] for r in results):.2f}" for k in keys))
        peaks[kind] = [r["peak_rss_mb"] for r in results]
    if "bridge" in peaks and "bridge-idle" in peaks:
        # The target (issue "lean where it counts"): the bridge's peak within 3 x the result over its idle peak.
        idle = statistics.median(peaks["bridge-idle"])
        over = [(p - idle) / args.mb for p in peaks["bridge"]]
        print(f"  bridge over bridge-idle ({idle:.1f} MB), in results of {args.mb:g} MB: "
              + ", ".join(f"{x:.2f}x" for x in over) + f" (target <= 3x: <= {idle + 3 * args.mb:.0f} MB)")
        if args.shape == "twice":
            print(f"  the same in messages of {2 * args.mb:g} MB (the result twice): "
                  + ", ".join(f"{x / 2:.2f}x" for x in over))


if __name__ == "__main__":
    main()
