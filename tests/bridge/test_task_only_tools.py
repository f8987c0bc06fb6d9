"""Tools a server runs only as tasks (`execution.taskSupport: required`) cannot run in the bridge (the SDK has no
tasks runtime): in chat they are left out of `tools` with a note saying why, and never offered to the agent's model.
The server is the real SDK server of `tests/servers/edges.py`, whose listing carries such a tool."""

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


@pytest.fixture
def url() -> Iterator[str]:
    with serve(edge_app(Edges())) as base:
        yield f"{base}/mcp"


async def test_task_only_tools_are_hidden_from_tools_and_the_agent_with_a_note(url: str) -> None:
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
    assert "• echo" in listing and "• task_only" not in listing
    assert "(not shown: task_only: it runs only as a task (task augmentation), which this bridge does not support " \
        "yet)" in listing
    assert "s__echo" in model.offered and not any("task_only" in name for name in model.offered)
