"""A server that asks people to visit whatever link it is given, on both eras, and says things with a zero-width
joiner: for the tests of where a link card says a link goes, and of the cleaner. Runs inline or over stdio
(`python tests/servers/links.py`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ElicitRequestURLParams, InputRequiredResult

from bridge.cli.demo.server import ask
from bridge.config.file import ServerConfig

FAMILY = "\U0001F468\u200d\U0001F469\u200d\U0001F467"
"""An emoji ZWJ sequence: its joiners must survive the cleaner."""
JOINED = f"pay\u200dpal says hi {FAMILY}"
"""A stray joiner inside a word (it reads as 'paypal') and a family emoji."""

TRICKS = [
    # (what the server sends, the host a browser opens, what a person would take it for)
    ("https://evil.example\\@good.example/login", "evil.example", "good.example"),
    ("https://evil.example:443\\@good.example/", "evil.example", "good.example"),
    ("https://bank.example\u200b.evil.example/", "bank.example.evil.example", "bank.example[U+200B].evil.example"),
]
"""Links written to read as one host while a browser opens another (issue 21)."""

server = MCPServer("links")


def config(transport: str) -> ServerConfig:
    """This server as the bridge runs it: in-process ("inline") or as a child process over stdio."""
    if transport == "stdio":
        return ServerConfig(name="links", command=sys.executable, args=(str(Path(__file__)),))
    return ServerConfig(name="links", inprocess=server)


@server.tool()
async def visit(ctx: Context, url: str) -> str | InputRequiredResult:
    """Ask the person to visit `url` (URL-mode elicitation) and report what they answered."""
    answer = await ask(ctx, "visit", ElicitRequestURLParams(message=f"Sign in to continue: {JOINED}", url=url,
                                                            elicitation_id="visit-1"))
    if isinstance(answer, InputRequiredResult):
        return answer
    return json.dumps({"era": ctx.protocol_version, "action": answer.action})


@server.tool()
def joined() -> str:
    """Text with a stray zero-width joiner and an emoji sequence."""
    return JOINED


if __name__ == "__main__":
    server.run()
