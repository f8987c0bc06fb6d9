"""MCP servers defined inline with the SDK's `MCPServer`, used by the core tests on both protocol eras.

Tools ask in whichever way the connection allows (the demo server's `ask`): the legacy back-channel on 2025-11-25,
`input_required` on 2026-07-28, so one test body covers both eras. Raw schemas let tests send what pydantic models
cannot (titled enums, schemas outside the subset).
"""

from __future__ import annotations

import json
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import (
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    InputRequiredResult,
)

from bridge.cli.demo.server import EVERY_FIELD, ask


def form_server(name: str = "forms") -> MCPServer:
    server = MCPServer(name)
    seen: list[ElicitResult] = []

    @server.tool()
    async def fill(ctx: Context, schema: str = "") -> str | InputRequiredResult:
        """Ask for a form (EVERY_FIELD unless a JSON schema is given) and report exactly what came back."""
        requested: dict[str, Any] = json.loads(schema) if schema else EVERY_FIELD
        answer = await ask(ctx, "form", ElicitRequestFormParams(message="Please fill this in <b>now</b>",
                                                                 requested_schema=requested))
        if isinstance(answer, InputRequiredResult):
            return answer
        seen.append(answer)
        return json.dumps({"era": ctx.protocol_version, "action": answer.action, "content": answer.content})

    @server.tool()
    async def visit(ctx: Context) -> str | InputRequiredResult:
        """Ask for a URL visit."""
        answer = await ask(ctx, "url", ElicitRequestURLParams(
            message="Connect your account", url="https://xn--exmple-cua.com/login?x=1", elicitation_id="e-1"))
        if isinstance(answer, InputRequiredResult):
            return answer
        if answer.action == "accept" and (ctx.protocol_version or "") < "2026-07-28":
            # 2025-11-25 servers may say when the out-of-band flow is done; 2026-07-28 removed the notification.
            await ctx.session.send_elicit_complete("e-1")
        return json.dumps({"era": ctx.protocol_version, "action": answer.action})

    @server.tool()
    def echo(message: str) -> str:
        """Echo."""
        return message

    server.seen = seen  # type: ignore[attr-defined]
    return server


def two_forms_server() -> MCPServer:
    """One round with two questions; a schema outside the subset for the second when `bad` is set."""
    server = MCPServer("pair")

    def form(name: str, kind: str = "string") -> ElicitRequest:
        schema = {"type": "object", "properties": {name: {"type": kind}}, "required": [name]}
        return ElicitRequest(params=ElicitRequestFormParams(message=f"{name}?", requested_schema=schema))

    @server.tool()
    async def pair(ctx: Context, bad: bool = False) -> str | InputRequiredResult:
        """Ask two things at once."""
        answers = ctx.input_responses or {}
        if {"a", "b"} <= set(answers):
            return json.dumps({k: v.content for k, v in answers.items() if isinstance(v, ElicitResult)})
        return InputRequiredResult(input_requests={"a": form("a"), "b": form("b", "object" if bad else "string")},
                                   request_state="pair")

    return server
