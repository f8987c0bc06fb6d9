"""Where the demo keeps its things, and the key that lets its 2026 requests outlive the process that asked them."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from mcp import Client, MCPError
from mcp.types import CallToolResult, ElicitResult, InputRequiredResult, TextContent

from bridge.cli.demo import setup as demo
from bridge.cli.demo import state as demo_state
from bridge.cli.demo.server import build
from bridge.errors import ConfigError

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]


def test_the_state_folder_follows_xdg(tmp_path: Path) -> None:
    assert demo_state.state_dir({"XDG_STATE_HOME": str(tmp_path)}) == tmp_path / "mcp-chat-bridge"
    default = Path.home() / ".local/state/mcp-chat-bridge"
    assert demo_state.state_dir({}) == default
    assert demo_state.state_dir({"XDG_STATE_HOME": "relative/path"}) == default  # the XDG spec says to ignore those


def test_the_key_is_made_once_private_and_kept(tmp_path: Path) -> None:
    folder = tmp_path / "state"
    key = demo_state.request_state_key(folder, {})
    path = folder / demo_state.KEY_FILE
    assert len(key) == 64 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert demo_state.request_state_key(folder, {}) == key
    assert demo_state.request_state_key(folder, {demo_state.KEY_ENV: "ab" * 32}) == "ab" * 32
    path.chmod(0o644)
    with pytest.raises(ConfigError, match="readable by others"):
        demo_state.request_state_key(folder, {})


def test_demo_config_names_its_store_and_offers_roots(tmp_path: Path) -> None:
    config = demo.config("legacy", {"XDG_STATE_HOME": str(tmp_path)})
    assert config.store == str(tmp_path / "mcp-chat-bridge" / "demo.db")
    server = config.servers["demo"]
    assert server.protocol == "legacy" and set(config.chat) == {"console"}
    assert (tmp_path / "mcp-chat-bridge").as_uri() in [uri for uri, _ in server.roots.defaults]


async def first_round(key: str) -> InputRequiredResult:
    async with Client(build([key]), mode="auto") as client:
        result = await client.session.call_tool("plan_trip", {}, allow_input_required=True)
    assert isinstance(result, InputRequiredResult) and result.request_state
    return result


async def test_a_request_state_sealed_before_a_restart_opens_after_it() -> None:
    key = "cd" * 32
    asked = await first_round(key)
    # A new server object is what a restarted process has: with the same key it takes the state back.
    async with Client(build([key]), mode="auto") as client:
        done = await client.session.call_tool("plan_trip", {}, allow_input_required=True,
                                              request_state=asked.request_state,
                                              input_responses={"trip": ElicitResult(action="decline")})
    assert isinstance(done, CallToolResult) and isinstance(done.content[0], TextContent)
    assert done.content[0].text == "No trip planned: you chose decline."
    # With the SDK's default (a key per process) the same state is refused: this is what the key file prevents.
    async with Client(build(), mode="auto") as client:
        with pytest.raises(MCPError, match="requestState"):
            await client.session.call_tool("plan_trip", {}, allow_input_required=True,
                                           request_state=asked.request_state,
                                           input_responses={"trip": ElicitResult(action="decline")})
