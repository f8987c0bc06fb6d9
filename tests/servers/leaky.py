"""A stdio MCP server that leaks the token it was configured with: on stderr before it dies, and in a result."""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("leaky")


@server.tool()
def crash() -> str:
    """Print the token to stderr and die mid-call."""
    print(f"fatal: cannot authenticate with token={os.environ.get('API_TOKEN')}", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool()
def whoami() -> str:
    """Answer with the token (a careless server)."""
    return f"you are authenticated as {os.environ.get('API_TOKEN')}"


if __name__ == "__main__":
    server.run()
