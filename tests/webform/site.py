"""A running bridge with web forms for the tests: a real `Host` (inline or stdio MCP servers, a recording chat
port), the one HTTP server on a free loopback port, and the web-form routes on it."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio

from bridge.door.model import Interaction, MessageIn
from bridge.host import Host
from bridge.web.forms import FormLinks, WebForms
from bridge.web.server import HttpServer
from tests.harness.hosts import ALICE, ROOM, FakeChatPort, config_for, host_for


class Clock:
    """Wall-clock time that a test can move forward (links expire without waiting)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


@dataclass
class Site:
    host: Host
    chat: FakeChatPort
    forms: WebForms
    server: HttpServer
    clock: Clock

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server.port}"

    async def call(self, server: str, tool: str, arguments: dict[str, Any] | None = None) -> Interaction:
        """Run a tool as Alice in the test room and return the card it asks with."""
        text = f"call {server} {tool}" + (f" {json.dumps(arguments)}" if arguments else "")
        seen = len(self.chat.cards)
        await self.host.handle_message(MessageIn(ROOM, ALICE, text, explicit_command=True))
        return await self.chat.wait_card(index=seen)

    async def result(self, server: str, tool: str) -> str:
        """The text of a tool's result as posted in the room."""
        text = await self.chat.wait_message(f"{server}.{tool}:")
        return text.split("\n", 1)[1]

    def link(self, card: Interaction) -> str:
        url = self.forms.link_for(card, ALICE)
        assert url is not None and url.startswith(self.base + "/form/")
        return url


@asynccontextmanager
async def running(servers: dict[str, Any], *, lifetime: float = 900.0, public_url: str = "",
                  **overrides: Any) -> AsyncIterator[Site]:
    """`servers` maps names to in-process `MCPServer`s or `ServerConfig`s (stdio), as `config_for` takes them."""
    host, chat = await host_for(config_for(servers, **overrides))
    server = HttpServer("127.0.0.1:0", public_url)
    clock = Clock()
    forms = WebForms(host, server, FormLinks(lifetime=lifetime, clock=clock))
    async with host, anyio.create_task_group() as tg:
        await tg.start(server.serve)
        yield Site(host, chat, forms, server, clock)
        tg.cancel_scope.cancel()
