"""A stdio MCP server that can be made to crash, for the crash-and-restart test."""

from __future__ import annotations

import os
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("crashy")


@server.tool()
def crash() -> str:
    """Die mid-call, leaving a last word on stderr."""
    print("fatal: the flux capacitor overheated", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool()
async def hang(ctx: Context) -> str:
    """Report that it started, then never finish."""
    await ctx.report_progress(0, 1, "hanging")
    await anyio.sleep_forever()
    return "never"


@server.tool()
def echo(message: str) -> str:
    """Echo."""
    return message


if __name__ == "__main__":
    if "--fail-start" in sys.argv:
        print("cannot start: missing API_TOKEN", file=sys.stderr, flush=True)
        sys.exit(1)
    server.run()
