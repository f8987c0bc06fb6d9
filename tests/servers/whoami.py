"""A stdio MCP server that says which process it is and what it sees of the environment (the prestart tests)."""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("whoami")


@server.tool()
def pid() -> str:
    """This server's process id."""
    return str(os.getpid())


@server.tool()
def env(name: str) -> str:
    """One environment variable as this server sees it ("-" when unset)."""
    return os.environ.get(name, "-")


@server.tool()
def text(size: int) -> str:
    """`size` characters on lines of a hundred: a long result, one JSON-RPC line on stdout."""
    return ("x" * 99 + "\n") * (size // 100) + "y" * (size % 100)


if __name__ == "__main__":
    server.run()
