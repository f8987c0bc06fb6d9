"""An inline MCP server exercising sampling, roots, tool annotations, progress, cancellation and logging.

Resolver-style tools (`Resolve` + `Sample` / `ListRoots`) work on both eras: a back-channel request on 2025-11-25,
`input_required` on 2026-07-28.
"""



import warnings
from dataclasses import dataclass, field
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context, ListRoots, MCPServer, Resolve, Sample
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.types import (
    CreateMessageResult,
    CreateMessageResultWithTools,
    ListRootsResult,
    NotificationParams,
    SamplingMessage,
    TextContent,
    Tool,
    ToolAnnotations,
    ToolChoice,
)


@dataclass
class Observed:
    """What the server saw, for tests to assert on."""

    ran: list[str] = field(default_factory=list)
    roots_changed: anyio.Event = field(default_factory=anyio.Event)
    cancelled: anyio.Event = field(default_factory=anyio.Event)
    started: anyio.Event = field(default_factory=anyio.Event)


def features_server(name: str = "feat") -> tuple[MCPServer, Observed]:
    server = MCPServer(name)
    seen = Observed()

    def draft(prompt: str) -> Sample:
        return Sample([SamplingMessage(role="user", content=TextContent(type="text", text=prompt))], max_tokens=50,
                      system_prompt="Be terse.")

    @server.tool()
    async def ask_model(prompt: str, answer: Annotated[CreateMessageResult, Resolve(draft)]) -> str:
        """Ask the host's model."""
        content = answer.content
        text = content.text if isinstance(content, TextContent) else str(content)
        return f"model={answer.model} text={text}"

    def want_roots() -> ListRoots:
        return ListRoots()

    @server.tool()
    async def my_roots(r: Annotated[ListRootsResult, Resolve(want_roots)]) -> str:
        """List the roots the client shares."""
        return "roots: " + ", ".join(f"{x.name or '-'}={x.uri}" for x in r.roots)

    def draft_with_tools(city: str) -> Sample:
        return Sample([SamplingMessage(role="user", content=TextContent(type="text", text=f"Weather in {city}?"))],
                      max_tokens=50, tools=[Tool(name="get_weather", description="Weather for a city",
                                                 input_schema={"type": "object",
                                                               "properties": {"city": {"type": "string"}}})],
                      tool_choice=ToolChoice(mode="auto"))

    @server.tool()
    async def ask_model_with_tools(city: str, answer: Annotated[CreateMessageResultWithTools,
                                                                Resolve(draft_with_tools)]) -> str:
        """Ask the host's model, offering it a tool."""
        blocks = answer.content if isinstance(answer.content, list) else [answer.content]
        return f"stop={answer.stop_reason} " + "; ".join(
            f"{b.type}:{getattr(b, 'name', getattr(b, 'text', ''))}" for b in blocks)

    @server.tool(annotations=ToolAnnotations(destructive_hint=True))
    def wipe(target: str) -> str:
        """Delete everything under target."""
        seen.ran.append(f"wipe {target}")
        return f"wiped {target}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def peek(target: str) -> str:
        """Look at target."""
        seen.ran.append(f"peek {target}")
        return f"{target} looks fine"

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @server.tool()
    async def slow(ctx: Context) -> str:
        """Report progress, then wait until cancelled."""
        await ctx.report_progress(1, 4, "warming up")
        seen.started.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            seen.cancelled.set()
            raise
        return "never"

    @server.tool()
    async def noisy(ctx: Context) -> str:
        """Log at several levels."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)  # logging is deprecated in 2026-07-28, not gone
            await ctx.debug("debug detail")
            await ctx.warning("disk almost full")
        return "logged"

    async def on_roots_changed(ctx: Any, params: NotificationParams) -> None:
        seen.roots_changed.set()

    server._lowlevel_server.add_notification_handler(  # the SDK's extension point for notifications
        "notifications/roots/list_changed", NotificationParams, on_roots_changed)
    return server, seen
