"""A small in-process MCP server for the adapter tests that do not need server-everything."""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import AcceptedElicitation, Context, MCPServer
from pydantic import BaseModel, Field


class Confirm(BaseModel):
    proceed: bool = Field(description="Go ahead?")


def make_server() -> MCPServer:
    server = MCPServer("inline-test-server")

    @server.tool()
    async def echo(message: str) -> str:
        """Say it back."""
        return f"echo: {message}"

    @server.tool()
    async def confirm(ctx: Context) -> str:
        """Ask a single yes/no question."""
        result = await ctx.elicit("Shall I go ahead?", Confirm)
        if isinstance(result, AcceptedElicitation):
            return f"accepted proceed={result.data.proceed}"
        return result.action

    @server.tool()
    async def forever(ctx: Context) -> str:
        """Report progress, then wait until stopped."""
        await ctx.report_progress(1, 4, "step 1 of 4")
        await anyio.sleep_forever()
        return "unreachable"

    return server
