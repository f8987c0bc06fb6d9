"""An MCP server that asks too much: many forms in one call, one form per call, and huge results. It reports how
each request came back, so tests see what the server received (an answer, or the bridge's error)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import anyio
from mcp import MCPError
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ElicitRequest, ElicitRequestFormParams, ElicitResult, InputRequiredResult

from bridge.cli.demo.server import ask

OK_FORM: dict[str, Any] = {"type": "object", "properties": {"ok": {"type": "boolean"}}}


def _legacy(ctx: Context) -> bool:
    return (ctx.protocol_version or "") < "2026-07-28"


def flood_server(name: str = "flood") -> MCPServer:
    server = MCPServer(name)

    @server.tool()
    async def many(ctx: Context, n: int = 30) -> str | InputRequiredResult:
        """Ask for `n` forms at once; report how many came back as what, and each refusal as it comes (as progress
        k of k, which the bridge shows at once)."""
        params = ElicitRequestFormParams(message="one of many", requested_schema=OK_FORM)
        if not _legacy(ctx):
            answers = ctx.input_responses or {}
            if answers:
                return json.dumps(Counter(a.action for a in answers.values() if isinstance(a, ElicitResult)))
            return InputRequiredResult(input_requests={f"k{i}": ElicitRequest(params=params) for i in range(n)},
                                       request_state="many")
        seen: Counter[str] = Counter()

        async def one() -> None:
            try:
                result = await ctx.session.elicit_form(params.message, OK_FORM, related_request_id=ctx.request_id)
                seen[result.action] += 1
            except MCPError as exc:
                seen[f"error {exc.code}"] += 1
                refused = sum(v for k, v in seen.items() if k.startswith("error"))
                await ctx.report_progress(refused, refused, "refused")

        async with anyio.create_task_group() as tg:
            for _ in range(n):
                tg.start_soon(one)
        return json.dumps(seen)

    @server.tool()
    async def one(ctx: Context) -> str | InputRequiredResult:
        """Ask for one form; report the answer or the error."""
        try:
            answer = await ask(ctx, "one", ElicitRequestFormParams(message="just one", requested_schema=OK_FORM))
        except MCPError as exc:
            return f"error {exc.code}: {exc.error.message}"
        if isinstance(answer, InputRequiredResult):
            return answer
        return answer.action

    @server.tool()
    def big(size: int) -> str:
        """A result of `size` characters: a line number every 100 characters, so a cut is easy to see."""
        lines = [f"{i:08d}".ljust(99, ".") for i in range(size // 100 + 1)]
        return "\n".join(lines)[:size]

    return server
