"""The demo MCP server that ships with the bridge (`mcp-chat-bridge demo`), built with the SDK's `MCPServer`.

It asks for everything a server can ask a person for, so the demo shows every card: a form with every field type
(`plan_trip`), a link to visit (`connect_account`), the host's model (`suggest_name`, sampling), the folders it may
see (`show_roots`, roots), and a tool whose annotations say it is destructive, so the bridge asks before running it
(`cancel_booking`), and one that refuses to act without the bridge's signed receipt of that approval (`wire_refund`,
`docs/receipts.md`). It also has progress (`count_down`), a prompt whose arguments have completions
(`packing_list`), and resources. Each works on both protocol eras: on a 2025-11-25 connection it asks through the
back-channel while the call is open; on a 2026-07-28 connection it returns `input_required` and reads the answer
from the retried call.

A 2026 request carries a `requestState` sealed with the server's key. The SDK's default key lives only as long as
the process, so a request asked before a restart could not be answered after it; `build(state_keys)` takes a key
that outlives the process (`bridge.cli.demo` keeps one in a file, or reads it from the environment).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Annotated, Any

import anyio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from mcp.server.mcpserver import Context, ListRoots, MCPServer, Resolve, Sample
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.request_state import RequestStateSecurity
from mcp.types import (
    Completion,
    CompletionArgument,
    CompletionContext,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    InputRequiredResult,
    ListRootsResult,
    PromptReference,
    ResourceTemplateReference,
    SamplingMessage,
    TextContent,
    ToolAnnotations,
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

CITIES = {"Lisbon": ("spring", "summer", "autumn"), "Oslo": ("summer", "winter"),
          "Kyoto": ("spring", "autumn", "winter"), "Reykjavik": ("summer", "winter")}
GUIDE = """# The demo trip guide

Lisbon is hilly: bring good shoes. Oslo in winter is dark by three. Kyoto is busiest in cherry-blossom season.
"""


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


async def connect_account(ctx: Context, service: str = "example") -> str | InputRequiredResult:
    """Connect an account: asks you to visit a link (URL-mode elicitation)."""
    answer = await ask(ctx, "connect", ElicitRequestURLParams(
        message=f"Sign in to {service} to connect your account.",
        url=f"https://auth.example.com/connect?service={service}", elicitation_id=f"connect-{service}"))
    if isinstance(answer, InputRequiredResult):
        return answer
    return f"Link flow: {answer.action}."


async def count_down(ctx: Context, steps: int = 5, seconds: float = 0.5) -> str:
    """Count down, reporting progress at each step."""
    steps = max(1, min(steps, 50))
    for i in range(steps):
        await ctx.report_progress(i + 1, steps, f"{steps - i - 1} to go")
        await anyio.sleep(max(0.0, min(seconds, 5.0)))
    return "Lift-off!"


def echo(message: str) -> str:
    """Say something back."""
    return message


def draft_name(topic: str) -> Sample:
    return Sample([SamplingMessage(role="user", content=TextContent(
        type="text", text=f"Suggest a short, friendly name for this: {topic}"))],
        max_tokens=40, system_prompt="You name things. Answer with the name only.")


async def suggest_name(topic: str, answer: Annotated[CreateMessageResult, Resolve(draft_name)]) -> str:
    """Suggest a name for something: asks the host's model (a sampling request, approved and reviewed in chat)."""
    text = answer.content.text if isinstance(answer.content, TextContent) else "(not text)"
    return f"Suggested name for {topic}: {text} (model: {answer.model})"


def ask_roots() -> ListRoots:
    return ListRoots()


async def show_roots(roots: Annotated[ListRootsResult, Resolve(ask_roots)]) -> str:
    """Show the folders this server may see: asks for the conversation's roots (a roots request)."""
    if not roots.roots:
        return "No folders were shared with me."
    return "I may see: " + ", ".join(f"{r.name or r.uri} ({r.uri})" for r in roots.roots)


def cancel_booking(booking: str = "Lisbon, 3 nights") -> str:
    """Cancel a booking. Marked destructive, so the bridge asks before it runs (nothing real is cancelled)."""
    return f"Cancelled the booking {booking!r} (not really: this is a demo)."


class ReceiptGate:
    """The demo's `wire_refund`: a tool that acts only on a valid receipt of a person's approval of exactly this call
    (the bridge's `_meta` receipt, `docs/receipts.md`), each receipt once."""

    def __init__(self, keys: Sequence[Ed25519PublicKey]) -> None:
        self._keys = list(keys)
        self._used: dict[str, float] = {}

    def wire_refund(self, ctx: Context, booking: str = "Lisbon, 3 nights", amount: int = 120) -> str:
        """Refund a booking. Acts only with the bridge's signed receipt of a person's approval of this very call."""
        from bridge.safety.receipts.canonical import tool_digest
        from bridge.safety.receipts.tokens import META_KEY, ReceiptInvalid, verify

        token = (ctx.request_context.meta or {}).get(META_KEY)
        if not isinstance(token, str) or not self._keys:
            raise ToolError("Refused: no receipt of an approval came with this call (is MCP_BRIDGE_RECEIPT_KEY set?).")
        try:
            # The arguments as they came (defaults not filled in): what the person approved.
            sent = (ctx.request_context.params or {}).get("arguments") or {}
            claims = verify(token, self._keys, kinds=("tool",), request=tool_digest("wire_refund", sent))
        except ReceiptInvalid as exc:
            raise ToolError(f"Refused: the receipt does not hold ({exc}).") from None
        now = time.time()
        self._used = {jti: exp for jti, exp in self._used.items() if exp > now}
        if claims["jti"] in self._used:
            raise ToolError("Refused: this receipt was used before.")
        self._used[claims["jti"]] = float(claims["exp"])
        return (f"Refunded {amount} EUR for {booking!r} (not really: this is a demo), approved by "
                f"{', '.join(claims['by'])}, receipt {claims['jti']}.")


def packing_list(city: str, season: str) -> str:
    """A packing list for a city and a season (both arguments have completions; the seasons depend on the city)."""
    return f"Write a short packing list for {season} in {city}."


async def complete(ref: PromptReference | ResourceTemplateReference, argument: CompletionArgument,
                   context: CompletionContext | None) -> Completion | None:
    if not isinstance(ref, PromptReference) or ref.name != "packing_list":
        return None
    typed = argument.value.lower()
    if argument.name == "city":
        values = [c for c in CITIES if c.lower().startswith(typed)]
    elif argument.name == "season":
        city = ((context.arguments if context else None) or {}).get("city", "")
        seasons = CITIES.get(city, ("spring", "summer", "autumn", "winter"))
        values = [s for s in seasons if s.startswith(typed)]
    else:
        return None
    return Completion(values=values, total=len(values), has_more=False)


def guide() -> str:
    """Travel notes for the demo's cities."""
    return GUIDE


def city_notes(city: str) -> str:
    """One city's notes."""
    return f"# {city}\n\nSeasons to visit: {', '.join(CITIES.get(city, ('any',)))}."


STATE_TTL = 24 * 3600
"""How long a sealed `requestState` is accepted: longer than any card timeout, so an answer given hours later (or after
a restart) still continues the call. The SDK's default is 600 seconds."""


def state_security(state_keys: Sequence[str | bytes] | None) -> RequestStateSecurity | None:
    """How the demo seals its `requestState`: with `state_keys` (the first seals, all open) for a day; without them,
    the SDK's default (a key held only by this process, for 600 seconds)."""
    return RequestStateSecurity(keys=list(state_keys), ttl=STATE_TTL) if state_keys else None


def build(state_keys: Sequence[str | bytes] | None = None,
          receipt_keys: Sequence[Ed25519PublicKey] = ()) -> MCPServer:
    """The demo server. `state_keys` seal its 2026 `requestState` (`state_security`); without them the key lives only
    as long as this process, and the bridge runs a call again after a restart, reusing the answers already given.
    `receipt_keys`: the bridge's receipt keys, which `wire_refund` checks its receipts with."""
    security = state_security(state_keys)
    server = MCPServer("mcp-chat-bridge-demo", request_state_security=security,
                       instructions="A demo server: plan a trip, connect an account, name things, show roots.")
    for tool in (plan_trip, connect_account, suggest_name, show_roots, count_down, echo):
        server.add_tool(tool)
    server.add_tool(cancel_booking, annotations=ToolAnnotations(destructive_hint=True, read_only_hint=False))
    server.add_tool(ReceiptGate(receipt_keys).wire_refund, name="wire_refund",
                    annotations=ToolAnnotations(destructive_hint=True, read_only_hint=False))
    server.prompt()(packing_list)
    server.completion()(complete)  # type: ignore[no-untyped-call]  # the SDK leaves this decorator untyped
    server.resource("demo://guide", name="guide", mime_type="text/markdown")(guide)
    server.resource("demo://cities/{city}", name="city", mime_type="text/markdown")(city_notes)
    return server


server = build()
"""A demo server with a per-process key, for tests and in-process use that need no restarts."""


def main() -> None:
    """Run the demo server on stdio (`python -m bridge.cli.demo.server`), for other MCP clients. Its requestState key
    comes from MCP_CHAT_BRIDGE_DEMO_KEY or the demo's key file, so a restarted server still accepts its requests."""
    from bridge.cli.demo.state import request_state_key, state_dir

    build([request_state_key(state_dir())]).run()


if __name__ == "__main__":
    main()
