"""A stdio MCP server that can be made to crash, for the crash-and-restart test."""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("crashy")


@server.tool()
def crash() -> str:
    """Die mid-call, leaving a last word on stderr."""
    print("fatal: the flux capacitor overheated", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool()
def echo(message: str) -> str:
    """Echo."""
    return message


if __name__ == "__main__":
    if "--fail-start" in sys.argv:
        print("cannot start: missing API_TOKEN", file=sys.stderr, flush=True)
        sys.exit(1)
    server.run()
