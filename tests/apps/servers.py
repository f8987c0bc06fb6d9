"""The example app servers from npm (tests/npm) for the MCP Apps tests, started over stdio as their READMEs say.
Test modules import the fixtures they use."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from bridge.config.file import ServerConfig

ROOT = Path(__file__).resolve().parents[2]
NPM = ROOT / "tests/npm/node_modules/@modelcontextprotocol"


def app_server(name: str, package: str, **fields: object) -> ServerConfig:
    entry = NPM / package / "dist/index.js"
    if not entry.exists():
        pytest.fail(f"{entry} is missing: run `bash scripts/dev.sh test` (it runs npm ci in tests/npm)")
    return ServerConfig(name=name, command="node", args=(str(entry), "--stdio"), apps=True, **fields)  # type: ignore[arg-type]


def gated(server: ServerConfig, tool: str) -> ServerConfig:
    """`server` with calls of `tool` needing approval (`tools.approve: {tool: always}`)."""
    return replace(server, tool_rules=((tool, "always"),))


@pytest.fixture
def basic() -> ServerConfig:
    """`get-time` with an app (vanilla JS): shows the result's time, calls get-time itself, sends messages and
    asks to open links."""
    return app_server("basic", "server-basic-vanillajs")


@pytest.fixture
def monitor() -> ServerConfig:
    """`get-system-info` with an app that polls `poll-system-stats`, a tool for the app alone, and draws a chart."""
    return app_server("monitor", "server-system-monitor")
