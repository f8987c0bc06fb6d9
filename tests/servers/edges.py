"""A streamable HTTP MCP server (the SDK's `MCPServer`) that sends what well-behaved servers do not.

The SDK will not let a server send an invalid result or a task-only tool, so a thin ASGI layer in front of the real
server rewrites its JSON answers by method, and records every method a client sent, so a test can say that a call
was refused before `tools/call` went out:

- `task_only` is listed with `execution.taskSupport: required`;
- `bad_header` is listed with an invalid `x-mcp-header` (clients on 2026-07-28 must drop such a tool);
- `no_result_type` answers without `resultType` (invalid on 2026-07-28);
- `needs_link` answers -32042 (URL required) on its first call and succeeds afterwards;
- `echo` sends back whatever text it is given (escape sequences, bidi overrides, zero-width characters).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import UrlElicitationRequiredError
from mcp.types import ElicitRequestURLParams

HOSTILE = "\x1b[2J\x1b[31mred\x1b[0m \u202eevil\u202c zero\u200bwidth \u2066isolate\u2069 end"


@dataclass
class Edges:
    methods: list[str] = field(default_factory=list)
    link_calls: int = 0


def edge_server(state: Edges) -> MCPServer:
    server = MCPServer("edges")

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        return text

    @server.tool()
    def task_only() -> str:
        """Runs only as a task (as listed)."""
        return "ran without a task"

    @server.tool()
    def bad_header(region: str) -> str:
        """Declares an invalid x-mcp-header (as listed)."""
        return region

    @server.tool()
    def no_result_type() -> str:
        """Answers without resultType (as sent)."""
        return "fine"

    @server.tool()
    def needs_link() -> str:
        """Needs a link visited before its first run."""
        state.link_calls += 1
        if state.link_calls == 1:
            raise UrlElicitationRequiredError([ElicitRequestURLParams(
                message="Connect your account first", url="https://example.com/connect", elicitation_id="link-1")])
        return "linked"

    return server


def _rewrite(method: str, params: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    result = body.get("result")
    if not isinstance(result, dict):
        return body
    if method == "tools/list":
        for tool in result.get("tools", []):
            if tool["name"] == "task_only":
                tool["execution"] = {"taskSupport": "required"}
            if tool["name"] == "bad_header":
                tool["inputSchema"]["properties"]["region"]["x-mcp-header"] = "Bad Header:"
    if method == "tools/call" and params.get("name") == "no_result_type":
        result.pop("resultType", None)
    return body


class Rewriter:
    """ASGI middleware: records each JSON-RPC method (and each DELETE that ends a session) and rewrites the JSON
    answer (`json_response=True`)."""

    def __init__(self, app: Any, state: Edges) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "DELETE":
            headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
            self.state.methods.append(f"DELETE session={bool(headers.get('mcp-session-id'))} "
                                      f"version={headers.get('mcp-protocol-version', '')}")
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        request = b"".join(chunks)
        try:
            parsed = json.loads(request)
        except ValueError:
            parsed = {}
        method = parsed.get("method", "") if isinstance(parsed, dict) else ""
        params = parsed.get("params") or {} if isinstance(parsed, dict) else {}
        if method:
            self.state.methods.append(method)
        delivered = False

        async def replay() -> dict[str, Any]:
            nonlocal delivered
            if delivered:
                return {"type": "http.disconnect"}
            delivered = True
            return {"type": "http.request", "body": request, "more_body": False}

        start: dict[str, Any] = {}
        body: list[bytes] = []

        async def capture(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
                return
            body.append(message.get("body", b""))
            if message.get("more_body"):
                return
            payload = b"".join(body)
            with contextlib.suppress(ValueError):  # not JSON (an error page): passed on as it is
                payload = json.dumps(_rewrite(method, params, json.loads(payload))).encode()
            headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
            headers.append((b"content-length", str(len(payload)).encode()))
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": payload})

        await self.app(scope, replay, capture)


def edge_app(state: Edges) -> Any:
    return Rewriter(edge_server(state).streamable_http_app(json_response=True), state)
