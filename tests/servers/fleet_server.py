"""A small MCP server over streamable HTTP for the multi-worker tests and bench: every bridge worker reaches the same
process, as with any remote server (so a 2026 call's sealed `requestState` is valid whichever worker retries it).

`pick(tag)` asks for a yes-or-no form (no fields: Accept or Decline) in whichever way the connection's era allows,
and returns `"<tag> <era> <action>"`. Run: `python -m tests.servers.fleet_server PORT`.
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ElicitRequestFormParams, InputRequiredResult

from bridge.demo.server import ask

server = MCPServer("fleet")


@server.tool()
async def pick(ctx: Context, tag: str) -> str | InputRequiredResult:
    """Ask one person to accept or decline."""
    answer = await ask(ctx, "pick", ElicitRequestFormParams(message=f"Go ahead with {tag}?",
                                                            requested_schema={"type": "object", "properties": {}}))
    if isinstance(answer, InputRequiredResult):
        return answer
    return f"{tag} {ctx.protocol_version} {answer.action}"


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
