"""Inline MCP servers for the Matrix tests (module level: the SDK evaluates the tools' annotations by name)."""

from typing import Annotated, Literal

from mcp.server.mcpserver import (
    AcceptedElicitation,
    CancelledElicitation,
    Context,
    DeclinedElicitation,
    Elicit,
    ElicitationResult,
    MCPServer,
    RequestStateSecurity,
    Resolve,
)
from pydantic import BaseModel, Field


class Order(BaseModel):
    colour: Literal["red", "green", "blue"] = Field(default="red", description="Colour")
    note: str = Field(description="A note")


class Booking(BaseModel):
    name: str = Field(description="Your name")
    cuisine: Literal["italian", "thai", "mexican"] = Field(default="thai", description="Cuisine")
    outdoor: bool = Field(default=False, description="Sit outside?")
    guests: int = Field(ge=1, le=12, description="Number of guests")
    budget: float = Field(default=50.0, description="Budget per person")


class Colour(BaseModel):
    colour: Literal["red", "green", "blue"] = Field(default="red", description="Colour")


def _describe(result: ElicitationResult[Booking] | ElicitationResult[Order] | ElicitationResult[Colour]) -> str:
    match result:
        case AcceptedElicitation(data=data):
            return f"accepted: {data.model_dump()}"
        case DeclinedElicitation():
            return "declined"
        case CancelledElicitation():
            return "cancelled"
    return "?"


def orders() -> MCPServer:
    """A legacy-style server: the form is asked through the back-channel while the call stays open."""
    server = MCPServer("orders")

    @server.tool()
    async def order(ctx: Context) -> str:
        return _describe(await ctx.elicit("Your order, please", Order))

    return server


def ask_booking() -> Elicit[Booking]:
    return Elicit("Please fill in your booking", Booking)


def bookings() -> MCPServer:
    """A resolver-style server: on the 2026 era the form comes back as input_required (durable across restarts)."""
    server = MCPServer("bookings")

    @server.tool()
    async def book(booking: Annotated[ElicitationResult[Booking], Resolve(ask_booking)], ctx: Context) -> str:
        return f"[{ctx.protocol_version}] " + _describe(booking)

    return server


PETS: dict[str, object] = {"type": "object", "properties": {
    "pets": {"type": "array", "title": "Pets", "default": ["cat"],
             "items": {"type": "string", "enum": ["cat", "dog", "fish"]}},
    "vaccinated": {"type": "boolean", "title": "Vaccinated?"}}}


def pets() -> MCPServer:
    """A legacy server with a raw schema: a multi-select with a default and an optional yes/no (no default)."""
    server = MCPServer("pets")

    @server.tool()
    async def adopt(ctx: Context) -> str:
        result = await ctx.session.elicit_form("Which pets?", PETS, related_request_id=ctx.request_id)
        if result.action != "accept" or result.content is None:
            return str(result.action)
        answer = {"pets": result.content.get("pets"), "vaccinated": result.content.get("vaccinated")}
        return f"accepted: {answer!r}"

    return server


COLOURS_KEY = b"colours-request-state-key-for-the-tests-0123456789"
"""The same key in every process that runs `colours()`: a worker continues a call another worker's copy began."""


def ask_colour() -> Elicit[Colour]:
    return Elicit("Pick a colour", Colour)


def colours() -> MCPServer:
    """A resolver-style server with a one-poll form (answered by a vote and a ✅), that accepts its request state in
    every process that runs it (bridge workers each run their own copy)."""
    server = MCPServer("colours", request_state_security=RequestStateSecurity(keys=[COLOURS_KEY], ttl=3600))

    @server.tool()
    async def pick(colour: Annotated[ElicitationResult[Colour], Resolve(ask_colour)], ctx: Context) -> str:
        return f"[{ctx.protocol_version}] " + _describe(colour)

    return server
