"""An MCP server with an app, made with the SDK's own MCP Apps extension (`mcp.server.apps`): `show` has an app and
says whether the client negotiated apps; `poll` is for the app alone; `hidden` for the model alone; `wipe` is one a
test may gate with an approval rule. The app's resource declares one API origin (and junk that must be dropped)."""

from __future__ import annotations

from mcp.server.apps import Apps, ResourceCsp, client_supports_apps
from mcp.server.mcpserver import Context, MCPServer

URI = "ui://kit/app.html"
HTML = "<!doctype html><html><body><p id=hello>Hello from the kit</p></body></html>"


def kit() -> MCPServer:
    apps = Apps()
    calls: list[str] = []

    @apps.tool(resource_uri=URI, title="Show the kit", description="Shows the kit's app.")
    def show(ctx: Context, what: str = "all") -> str:
        calls.append(f"show {what}")
        return f"showing {what}; apps negotiated: {client_supports_apps(ctx)}"

    @apps.tool(resource_uri=URI, visibility=["app"], description="Polled by the app.")
    def poll() -> str:
        calls.append("poll")
        return "polled"

    @apps.tool(resource_uri=URI, visibility=["model"], description="For the model only.")
    def hidden() -> str:
        return "hidden"

    @apps.tool(resource_uri=URI, description="Wipes something.")
    def wipe() -> str:
        calls.append("wipe")
        return "wiped"

    apps.add_html_resource(URI, HTML, csp=ResourceCsp(connect_domains=["https://api.example.com", "*", "x; y"]))
    server = MCPServer("kit", extensions=[apps])

    @server.tool()
    def ran() -> str:
        """What the app's tools have done so far."""
        return ", ".join(calls) or "nothing"

    return server
