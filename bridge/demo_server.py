"""The demo MCP server that ships with the bridge (`mcp-chat-bridge demo`), built with the SDK's `MCPServer`.

Its tools ask for a form with every field type the spec allows, ask for a link to be visited, and report progress.
Each works on both protocol eras: on a 2025-11-25 connection it asks through the back-channel while the call is
open; on a 2026-07-28 connection it returns `input_required` and reads the answer from the retried call.
"""

from __future__ import annotations

import json
import os
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer, RequestStateSecurity
from mcp.types import (
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    InputRequiredResult,
)

EVERY_FIELD: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Your name", "minLength": 2, "maxLength": 60},
        "email": {"type": "string", "title": "Email", "format": "email"},
        "homepage": {"type": "string", "title": "Homepage", "format": "uri"},
        "start": {"type": "string", "title": "Start date", "format": "date"},
        "pickup": {"type": "string", "title": "Pick-up time", "format": "date-time"},
        "travellers": {"type": "integer", "title": "Travellers", "minimum": 1, "maximum": 12, "default": 2},
        "budget": {"type": "number", "title": "Budget per night (EUR)", "minimum": 0, "maximum": 5000,
                   "default": 120.5},
        "window": {"type": "boolean", "title": "Window seat?", "default": False},
        "climate": {"type": "string", "title": "Climate", "enum": ["warm", "mild", "cold"], "default": "mild"},
        "city": {"type": "string", "title": "City",
                 "oneOf": [{"const": "lis", "title": "Lisbon"}, {"const": "osl", "title": "Oslo"},
                           {"const": "kyo", "title": "Kyoto"}]},
        "room": {"type": "string", "title": "Room", "enum": ["s", "d", "x"],
                 "enumNames": ["Single", "Double", "Suite"], "default": "d"},
        "activities": {"type": "array", "title": "Activities", "minItems": 1, "maxItems": 3,
                       "items": {"type": "string", "enum": ["hiking", "museums", "food", "beach"]},
                       "default": ["food"]},
        "extras": {"type": "array", "title": "Extras",
                   "items": {"anyOf": [{"const": "bf", "title": "Breakfast"}, {"const": "pk", "title": "Parking"},
                                       {"const": "late", "title": "Late check-out"}]}},
    },
    "required": ["name", "email", "start", "city"],
}

STATE_KEY_ENV = "MCP_DEMO_STATE_KEY"
"""With a key (32 bytes or more) here, the demo seals its `requestState` with it and accepts it for a day, so a
pending form survives a restart of the demo (run over stdio, it restarts with the bridge). Without one, the SDK's
default applies: a key held only by this process, for 600 seconds; the bridge then runs the call again after a
restart and reuses the answers already given."""


def _state_security() -> RequestStateSecurity | None:
    key = os.environ.get(STATE_KEY_ENV, "")
    if not key:
        return None
    if len(key.encode()) < 32:
        raise SystemExit(f"{STATE_KEY_ENV} must be at least 32 bytes long")
    return RequestStateSecurity(keys=[key.encode()], ttl=24 * 3600)


server = MCPServer("mcp-chat-bridge-demo", instructions="A demo server: plan a trip, connect an account, count down.",
                   request_state_security=_state_security())


async def ask(ctx: Context, key: str, params: ElicitRequestFormParams | ElicitRequestURLParams,
              ) -> ElicitResult | InputRequiredResult:
    """Ask the client in whichever way the connection's era allows."""
    if (ctx.protocol_version or "") < "2026-07-28":
        if isinstance(params, ElicitRequestURLParams):
            result: ElicitResult = await ctx.session.elicit_url(
                params.message, params.url, params.elicitation_id or key, related_request_id=ctx.request_id)
            return result
        result = await ctx.session.elicit_form(params.message, params.requested_schema,
                                               related_request_id=ctx.request_id)
        return result
    answer = (ctx.input_responses or {}).get(key)
    if isinstance(answer, ElicitResult):
        return answer
    return InputRequiredResult(input_requests={key: ElicitRequest(params=params)}, request_state=key)


@server.tool()
async def plan_trip(ctx: Context) -> str | InputRequiredResult:
    """Plan a trip: asks for a form with every field type (text, email, URL, date, date-time, numbers, yes/no,
    single and multiple choice)."""
    answer = await ask(ctx, "trip", ElicitRequestFormParams(
        message="Where shall we go? Fill in the trip details.", requested_schema=EVERY_FIELD))
    if isinstance(answer, InputRequiredResult):
        return answer
    if answer.action != "accept":
        return f"No trip planned: you chose {answer.action}."
    return "Trip planned with: " + json.dumps(answer.content, sort_keys=True)


@server.tool()
async def connect_account(ctx: Context, service: str = "example") -> str | InputRequiredResult:
    """Connect an account: asks you to visit a link (URL-mode elicitation)."""
    answer = await ask(ctx, "connect", ElicitRequestURLParams(
        message=f"Sign in to {service} to connect your account.",
        url=f"https://auth.example.com/connect?service={service}", elicitation_id=f"connect-{service}"))
    if isinstance(answer, InputRequiredResult):
        return answer
    return f"Link flow: {answer.action}."


@server.tool()
async def count_down(ctx: Context, steps: int = 5, seconds: float = 0.5) -> str:
    """Count down, reporting progress at each step."""
    steps = max(1, min(steps, 50))
    for i in range(steps):
        await ctx.report_progress(i + 1, steps, f"{steps - i - 1} to go")
        await anyio.sleep(max(0.0, min(seconds, 5.0)))
    return "Lift-off!"


@server.tool()
def echo(message: str) -> str:
    """Say something back."""
    return message


def main() -> None:
    """Run the demo server on stdio (`python -m bridge.demo_server`), for other MCP clients."""
    server.run()


if __name__ == "__main__":
    main()
