"""Whether the bridge offers a server the MCP Apps extension (`io.modelcontextprotocol/ui`), and where apps run.

An app is HTML a browser must show on a page of the bridge and, per the extension, inside a sandbox on another origin
than that page. So the bridge can show apps only with its HTTP server, a public address people's browsers reach, and
a second origin of the same server (`http.app_sandbox_url`, or the public address with `localhost` and `127.0.0.1`
swapped, which is another origin to a browser). A server is offered the extension only then (unless its `apps: false`),
so a server never sends an app nobody can open.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from bridge.config.file import Config, HttpConfig, ServerConfig

EXTENSION = "io.modelcontextprotocol/ui"
MIME_TYPE = "text/html;profile=mcp-app"
SETTINGS = {"mimeTypes": [MIME_TYPE]}
"""What the client capability carries: the kinds of app HTML this host renders."""

_SWAPPED = {"localhost": "127.0.0.1", "127.0.0.1": "localhost"}


def sandbox_url(http: HttpConfig) -> str:
    """The sandbox's base address, or empty when there is none (apps are off)."""
    if http.app_sandbox_url:
        return http.app_sandbox_url.rstrip("/")
    return swapped(http.public_url)


def swapped(url: str) -> str:
    """`url` with the host `localhost` written `127.0.0.1` or the other way round (another origin to a browser,
    the same server), or empty for any other host."""
    if not url:
        return ""
    parts = urlsplit(url.rstrip("/"))
    other = _SWAPPED.get(parts.hostname or "")
    if other is None:
        return ""
    netloc = other + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def possible(config: Config) -> bool:
    """Whether this bridge can show apps at all."""
    return bool(config.http.listen and config.http.public_url and sandbox_url(config.http))


def offered(config: Config, server: ServerConfig) -> bool:
    """Whether `server` is offered the extension: its `apps` key, else whether apps can be shown."""
    return server.apps if server.apps is not None else possible(config)
