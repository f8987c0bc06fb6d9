"""An MCP server at the edges of the form subset: a prompt whose completions repeat themselves."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.types import Completion, CompletionArgument, CompletionContext, PromptReference, ResourceTemplateReference


def repeating_server(name: str = "edgy") -> MCPServer:
    server = MCPServer(name)

    def greet(person: str) -> str:
        """Greet someone (the completions for `person` repeat a name)."""
        return f"Write a greeting for {person}."

    async def complete(ref: PromptReference | ResourceTemplateReference, argument: CompletionArgument,
                       context: CompletionContext | None) -> Completion | None:
        return Completion(values=["ada", "ada", "grace"])

    server.prompt()(greet)
    server.completion()(complete)  # type: ignore[no-untyped-call]  # the SDK leaves this decorator untyped
    return server
