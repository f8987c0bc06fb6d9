"""Per-person sign-in in chat, for tests on every platform: a protected MCP server with its authorization server (the
SDK's pieces, `tests/servers/oauth.py`, with a login page so each person signs in as themselves), the bridge's HTTP
server receiving the redirects, and a browser that follows a Connect link as a named person."""

from __future__ import annotations

import base64
import secrets
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import pytest
from mcp.types import CallToolResult, TextContent

from bridge.config.auth import AuthConfig
from bridge.config.file import ServerConfig
from bridge.door.model import Actor, ConversationKey, Interaction
from bridge.host import Host
from bridge.web.server import HttpServer
from tests.harness.hosts import FakeChatPort
from tests.servers.oauth import Provider, protected_server
from tests.servers.serving import bound_socket, serve

KEY_ENV = "TEST_SIGNIN_KEY"

# The people of the sign-in tests, in one shared channel.
ADA = Actor("test", "U-ada", "Ada")
BOB = Actor("test", "U-bob", "Bob")
CY = Actor("test", "U-cy", "Cy")
CHANNEL = ConversationKey("test", "W1", "C1")


@dataclass
class Site:
    url: str
    provider: Provider
    tokens: Path

    def server(self, name: str = "s", *, timeout: float = 60.0) -> ServerConfig:
        """A `per_user` server entry for the protected MCP server."""
        return ServerConfig(name, url=self.url, auth=AuthConfig(identity="per_user", timeout=timeout))

    def settings(self) -> dict[str, Any]:
        """The Config fields that keep tokens (encrypted, with the key in KEY_ENV)."""
        return {"secrets_key_env": KEY_ENV, "token_store": str(self.tokens)}


@contextmanager
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    provider = Provider(login=True)
    sock = bound_socket()
    monkeypatch.setenv(KEY_ENV, base64.b64encode(secrets.token_bytes(32)).decode())
    with serve(protected_server(provider, sock), sock) as base:
        yield Site(f"{base}/mcp", provider, tmp_path / "tokens.db")


@asynccontextmanager
async def redirects(host: Host) -> AsyncIterator[HttpServer]:
    """The bridge's HTTP server on a loopback port, receiving the host's sign-in redirects."""
    http = HttpServer("127.0.0.1:0")
    host.accounts.serve_redirects(http)
    async with anyio.create_task_group() as tg:
        await tg.start(http.serve)
        yield http
        tg.cancel_scope.cancel()


@dataclass
class Visit:
    """What a person's browser went through: the authorization URL's query, and the bridge's page at the end."""

    query: dict[str, str]
    callback: str
    status: int
    page: str


async def sign_in(url: str, user: str) -> Visit:
    """Follow a Connect link as `user`: the authorization server's login page, then its redirect to the bridge."""
    query = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    async with httpx2.AsyncClient(timeout=30) as http:
        to_login = await http.get(url)
        assert to_login.status_code == 302, to_login.text
        back = await http.get(f"{to_login.headers['location']}&user={user}")
        assert back.status_code == 302, back.text
        callback = back.headers["location"]
        page = await http.get(callback)
    return Visit(query, callback, page.status_code, page.text)


async def get(url: str) -> httpx2.Response:
    async with httpx2.AsyncClient(timeout=30) as http:
        return await http.get(url)


def text(result: CallToolResult | None) -> str:
    """The text of a call that succeeded."""
    assert result is not None and not result.is_error, result
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


async def open_card(chat: FakeChatPort, person: Actor) -> Interaction:
    """The person's card still open in the chat (their sign-in prompt), once it is there."""
    return await chat.wait_for(lambda: next((c for c in chat.cards.values() if c.requester == person
                                             and c.id not in chat.finished), None))
