"""A 2026 stdio server on the SDK's defaults (an ephemeral request-state key, TTL 600 s), for restart tests.

Every process seals `requestState` with a key of its own, so a state sealed before the bridge (and with it this
server) restarted is rejected: "Invalid or expired requestState". Results carry the answering process's pid, so a test
can tell a fresh process answered.
"""

from __future__ import annotations

import json
import os
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ElicitRequest, ElicitRequestFormParams, ElicitResult, InputRequiredResult

from bridge.cli.demo.server import ask

server = MCPServer("stdio-forms")

FORM: dict[str, Any] = {"type": "object", "properties": {"guests": {"type": "integer", "title": "Guests"}},
                        "required": ["guests"]}


def _form(title: str, name: str) -> ElicitRequest:
    schema = {"type": "object", "properties": {name: {"type": "string", "title": title}}, "required": [name]}
    return ElicitRequest(params=ElicitRequestFormParams(message=f"{title}?", requested_schema=schema))


@server.tool()
async def book(ctx: Context, tag: str = "") -> str | InputRequiredResult:
    """One form; reports what came back and which process got it."""
    answer = await ask(ctx, "book", ElicitRequestFormParams(message=f"Book a table [{tag}]", requested_schema=FORM))
    if isinstance(answer, InputRequiredResult):
        return answer
    return json.dumps({"action": answer.action, "content": answer.content, "pid": os.getpid(), "tag": tag})


@server.tool()
async def two_steps(ctx: Context) -> str | InputRequiredResult:
    """Two rounds: who, then when (the first answer rides in the request state)."""
    state: dict[str, Any] = json.loads(ctx.request_state) if ctx.request_state else {}
    responses = ctx.input_responses or {}
    who = responses.get("who")
    if isinstance(who, ElicitResult):
        state["who"] = (who.content or {}).get("who")
    if "who" not in state:
        return InputRequiredResult(input_requests={"who": _form("Who", "who")}, request_state=json.dumps(state))
    when = responses.get("when")
    if not isinstance(when, ElicitResult):
        return InputRequiredResult(input_requests={"when": _form("When", "when")}, request_state=json.dumps(state))
    return json.dumps({"who": state["who"], "when": (when.content or {}).get("when"), "pid": os.getpid()})


@server.tool()
async def changing(ctx: Context) -> str | InputRequiredResult:
    """A form whose schema differs in every process (its title names the process)."""
    key = "pick"
    answer = (ctx.input_responses or {}).get(key)
    if isinstance(answer, ElicitResult):
        return json.dumps({"content": answer.content, "pid": os.getpid()})
    return InputRequiredResult(input_requests={key: _form(f"Pick (process {os.getpid()})", "pick")},
                               request_state=key)


if __name__ == "__main__":
    server.run()
