"""A small MCP server over streamable HTTP for the multi-worker tests and bench: every bridge worker reaches the same
process, as with any remote server (so a 2026 call's sealed `requestState` is valid whichever worker retries it).

`pick(tag)` asks for a yes-or-no form (no fields: Accept or Decline) in whichever way the connection's era allows,
and returns `"<tag> <era> <action>"` (saying `pick <tag> ran` on stderr). `hold(tag)` asks the same, says on stderr
each time it runs with an answer (`hold <tag> ran <n>`), and holds its first answer for a long time before it returns:
a test kills the worker waiting for it. Run: `python -m tests.servers.fleet_server PORT`.
"""

from __future__ import annotations

import sys
from collections import Counter

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ElicitRequestFormParams, InputRequiredResult

from bridge.cli.demo.server import ask

server = MCPServer("fleet")


@server.tool()
async def pick(ctx: Context, tag: str) -> str | InputRequiredResult:
    """Ask one person to accept or decline."""
    answer = await ask(ctx, "pick", ElicitRequestFormParams(message=f"Go ahead with {tag}?",
                                                            requested_schema={"type": "object", "properties": {}}))
    if isinstance(answer, InputRequiredResult):
        return answer
    print(f"pick {tag} ran", file=sys.stderr, flush=True)  # what a soak counts: a tool run twice is a failure
    return f"{tag} {ctx.protocol_version} {answer.action}"


ran: Counter[str] = Counter()
HOLD = 120.0
"""Seconds the first answer of a `hold` call is held before its result goes back."""


@server.tool()
async def hold(ctx: Context, tag: str) -> str | InputRequiredResult:
    """Ask one person, then take long over the first answer."""
    answer = await ask(ctx, "hold", ElicitRequestFormParams(message=f"Run {tag}?",
                                                            requested_schema={"type": "object", "properties": {}}))
    if isinstance(answer, InputRequiredResult):
        return answer
    ran[tag] += 1
    print(f"hold {tag} ran {ran[tag]}", file=sys.stderr, flush=True)
    if ran[tag] == 1:
        await anyio.sleep(HOLD)
    return f"{tag} {answer.action} {ran[tag]}"


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
