"""Tools a server runs only as tasks (`execution.taskSupport: required`) run in the bridge as tasks
(`bridge.calls.tasks`): `tools` lists them, marked, and the agent's model is offered them like any other. The server
is the real SDK server of `tests/servers/edges.py`, whose listing carries such a tool."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import anyio
import pytest

from bridge.config.file import Config, ServerConfig
from bridge.door.model import MessageIn
from bridge.host import Host
from bridge.llm import LLMRequest, LLMResponse
from bridge.storage import open_store
from tests.harness.hosts import ALICE, ROOM, FakeChatPort, patient
from tests.servers.edges import Edges, edge_app
from tests.servers.serving import serve

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]


@dataclass
class RecordingModel:
    """A model that answers at once and keeps what it was offered."""

    name: str = "openai"
    supports_tools: bool = True
    default_model: str | None = "m"
    offered: list[str] = field(default_factory=list)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.offered.extend(spec.name for spec in request.tools)
        return LLMResponse("Nothing to do.", "m", "endTurn")

    async def aclose(self) -> None:
        pass


EDGES = Edges()


@pytest.fixture
def url() -> Iterator[str]:
    EDGES.methods.clear()
    with serve(edge_app(EDGES)) as base:
        yield f"{base}/mcp"


async def test_task_only_tools_are_listed_marked_and_offered_to_the_agent(url: str) -> None:
    model = RecordingModel()
    config = Config(servers={"s": ServerConfig("s", url=url)}, store=":memory:")
    chat = FakeChatPort()
    host = Host(config, await open_store(":memory:"), llm=model)
    host.attach(chat)
    with anyio.fail_after(patient(30)):
        async with host:
            await host.handle_message(MessageIn(ROOM, ALICE, "tools s", explicit_command=True))
            listing = await chat.wait_message("s: ")
            await host.handle_message(MessageIn(ROOM, ALICE, "what can you do?"))
            await chat.wait_message("Nothing to do.")
    assert "• echo" in listing and "• task_only" in listing and "[runs as a task]" in listing
    assert "not shown" not in listing
    assert "s__echo" in model.offered and any("task_only" in name for name in model.offered)


async def test_a_session_without_a_task_is_still_ended_when_the_bridge_stops(url: str) -> None:
    # The bridge ends HTTP sessions itself (so that one a stored task is bound to can be kept): the others get the
    # DELETE the SDK would send, with their session id and protocol version.
    state_methods = EDGES.methods
    config = Config(servers={"s": ServerConfig("s", url=url, protocol="legacy")}, store=":memory:")
    chat = FakeChatPort()
    host = Host(config, await open_store(":memory:"))
    host.attach(chat)
    with anyio.fail_after(patient(30)):
        async with host:  # a 2025-11-25 session: the server gives it an id (a 2026 one is stateless)
            await host.handle_message(MessageIn(ROOM, ALICE, 'call s echo {"text": "hi"}', explicit_command=True))
            await chat.wait_message("s.echo:")
    deletes = [m for m in state_methods if m.startswith("DELETE")]
    assert deletes == ["DELETE session=True version=2025-11-25"]
