"""A stdio server whose results are as large as asked: numbered lines of text, and a short summary whose structured
content holds the rows (so it is shown after the text, as JSON)."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent

server = MCPServer("big")


def numbered(size: int) -> str:
    """`size` characters: lines "line 0000001" and so on, each ending in a newline, cut to fit."""
    lines = (size // 13) + 1
    return "".join(f"line {n:07d}\n" for n in range(lines))[:size]


@server.tool()
def logs(size: int) -> str:
    """`size` characters of numbered lines."""
    return numbered(size)


@server.tool()
def rows(count: int) -> CallToolResult:
    """A one-line summary, with `count` rows as structured content."""
    data: dict[str, Any] = {"rows": [{"n": n, "text": f"row \"{n}\"\n"} for n in range(count)]}
    return CallToolResult(content=[TextContent(type="text", text=f"{count} rows")], structured_content=data)


if __name__ == "__main__":
    server.run("stdio")
