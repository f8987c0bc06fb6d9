"""Fixtures for the Slack adapter tests: a fake Slack per test, and a bridge (host + Slack adapter) running against it.

`running_bridge` starts the adapter the way the CLI does (attach, `async with host`, `serve()` in a task) so the
tests drive the real bolt app over Socket Mode or signed HTTP. `everything` is the session-wide server-everything
config (a real legacy MCP server over stdio); tests that need it are skipped when node or the package is missing.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from adapters.slack import SlackAdapter, create
from bridge.config.file import ServerConfig
from bridge.host import Host
from bridge.storage import AsyncStore
from tests.harness.hosts import config_for, host_store, patient
from tests.harness.slack import FakeSlack

SIGNING_SECRET = "test-signing-secret"
EVERYTHING = (Path(__file__).resolve().parents[2]
              / "npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # bolt, slack_sdk and aiohttp are asyncio-only


@pytest.fixture(scope="session")
def everything() -> ServerConfig:
    """server-everything over stdio: its `trigger-elicitation-request` form has every field type."""
    node = shutil.which("node")
    if node is None or not EVERYTHING.exists():
        pytest.skip("node or @modelcontextprotocol/server-everything is not installed (tests/npm)")
    return ServerConfig(name="everything", command=node, args=(str(EVERYTHING), "stdio"))


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack() as fake:
        fake.users.update({"U1": "Ada Lovelace", "U2": "Charles Babbage"})
        yield fake


@dataclass
class Bridge:
    host: Host
    adapter: SlackAdapter


def slack_settings(slack: FakeSlack, **overrides: Any) -> dict[str, Any]:
    settings: dict[str, Any] = {"bot_token": "xoxb-test", "app_token": "xapp-test", "api_url": slack.api_url,
                                "signing_secret": SIGNING_SECRET, "http": {"host": "127.0.0.1", "port": 0}}
    return settings | overrides


@asynccontextmanager
async def running_bridge(slack: FakeSlack, servers: Mapping[str, Any], *, scope: str = "thread",
                         settings: Mapping[str, Any] | None = None, store: AsyncStore | None = None,
                         **overrides: Any) -> AsyncIterator[Bridge]:
    """A host with the Slack adapter attached and serving; `overrides` go to `config_for` (e.g.
    `server_elicitation_timeout=2`). Pass a `store` to run a second bridge on the first one's (a restart)."""
    config = config_for(servers, conversation_scope=scope, **overrides)
    host = Host(config, store or await host_store(config))
    adapter = create(host, dict(settings or slack_settings(slack)), config)
    host.attach(adapter)
    async with host, anyio.create_task_group() as tg:
        tg.start_soon(adapter.serve)
        with anyio.fail_after(patient(10)):
            await adapter.ready.wait()
        yield Bridge(host, adapter)
        tg.cancel_scope.cancel()
