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


if __name__ == "__main__":
    server.run()
