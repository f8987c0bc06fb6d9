"""What both benchmarks share: the in-process MCP server, chat ports that answer or count cards, and small stats."""

from __future__ import annotations

import gc
import json
import logging
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import psutil
from anyio.abc import TaskGroup
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, ElicitRequestFormParams, InputRequiredResult, TextContent

from bridge.cli.demo.server import ask
from bridge.door.model import Actor, CardRef, ConversationKey, DecisionIn, Interaction, MessageRef, Outcome
from bridge.host import Host
from bridge.safety.limits import Limits
from tests.harness.hosts import FakeChatPort

SERVER = "bench"
TOOL = "book"


def bench_limits(requests: int) -> Limits:
    """The `limits:` a bench's host needs: its one server asks for `requests` forms (one per call, warm-up included)
    well within a minute, far past the default of 60 requests per server a minute that keeps a shared host safe from
    a flooding server. The other bounds keep their defaults: each bench person has one card open at a time."""
    return Limits(server_requests_per_minute=max(Limits().server_requests_per_minute, requests))

SMALL_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name", "minLength": 1, "maxLength": 60},
        "guests": {"type": "integer", "title": "Guests", "minimum": 1, "maximum": 12},
        "window": {"type": "boolean", "title": "Window table?", "default": False},
    },
    "required": ["name", "guests"],
}
ANSWER: dict[str, Any] = {"name": "Ada", "guests": 2, "window": True}


def quiet_logs() -> None:
    """Keep only warnings. Constructing an `MCPServer` calls `logging.basicConfig(level=INFO)` with a rich handler
    on the root logger, so the SDK's and the bridge's INFO lines (one per session start) would reach stderr and
    cost time inside the measured rounds."""
    for name in ("mcp", "bridge"):
        logging.getLogger(name).setLevel(logging.WARNING)


def bench_server() -> MCPServer:
    """One tool that elicits a small form, on whichever era the connection speaks (the demo server's `ask`)."""
    server = MCPServer(SERVER)

    @server.tool()
    async def book(ctx: Context, tag: str = "") -> str | InputRequiredResult:
        """Ask for a small form and report what came back (with `tag`, to tell calls apart)."""
        answer = await ask(ctx, "book", ElicitRequestFormParams(message=f"Book a table [{tag}]",
                                                                 requested_schema=SMALL_FORM))
        if isinstance(answer, InputRequiredResult):
            return answer
        return json.dumps({"action": answer.action, "content": answer.content, "tag": tag})

    return server


def tag_of(interaction: Interaction) -> str:
    """The `tag` the call that caused this card was made with (the tool puts it in the form's message)."""
    return interaction.message.rsplit("[", 1)[-1].rstrip("]")


def answer_for(tag: str) -> dict[str, Any]:
    """A distinct accepted answer per tag, so a result proves its own request got its own answer."""
    return {**ANSWER, "name": tag} if tag else ANSWER


def answered(result: CallToolResult | str | None, tag: str = "") -> bool:
    """Whether a tool result (or the text the bridge reported for it) is the server reporting the accepted answer
    meant for this tag."""
    if isinstance(result, CallToolResult):
        if result.is_error or not result.content or not isinstance(result.content[0], TextContent):
            return False
        result = result.content[0].text
    if not result or not result.startswith("{"):
        return False
    data = json.loads(result)
    return bool(data == {"action": "accept", "content": answer_for(tag), "tag": tag})


class ResultsPort(FakeChatPort):
    """A chat port that keeps the results the bridge reports (`server.tool:` messages, how a parked call's result
    arrives), by the tag the call was made with, and wakes whoever waits for a number of them."""

    def __init__(self) -> None:
        super().__init__()
        self.results: dict[str, str] = {}
        """The reported result texts by tag (parsed only by whoever checks them, outside any timing)."""
        self._reported: anyio.Event | None = None
        """Made only while someone waits, as `FakeChatPort` does: the fake platform's own cost is not the bridge's."""

    async def send(self, conversation: ConversationKey, text: str) -> MessageRef:
        head = f"{SERVER}.{TOOL}:\n"
        if not text.startswith(head):
            return await super().send(conversation, text)
        body = text[len(head):]
        start = body.find('"tag": "')
        tag = body[start + 8:body.index('"', start + 8)] if start >= 0 else ""
        self.results[tag] = body
        if self._reported is not None:
            self._reported.set()
            self._reported = None
        return MessageRef(conversation, {"n": "result"})

    async def wait_results(self, count: int) -> None:
        while len(self.results) < count:
            if self._reported is None:
                self._reported = anyio.Event()
            await self._reported.wait()


class AnsweringPort(ResultsPort):
    """A chat port whose person answers every card the moment it is posted: `post_card` schedules
    `host.decide(accept)` in the bench's task group, so the round trip has no think time and no sleeps."""

    def __init__(self, actor: Actor, content: Mapping[str, Any], *, finish_delay: float = 0.0) -> None:
        super().__init__()
        self._actor = actor
        self._content = dict(content)
        self._finish_delay = finish_delay
        """Seconds each final card update takes (a real chat.update: 0.1–0.3 s), instead of the fake's none."""
        self._host: Host | None = None
        self._tg: TaskGroup | None = None
        self.refused = 0

    def bind(self, host: Host, tg: TaskGroup) -> None:
        self._host, self._tg = host, tg

    async def post_card(self, interaction: Interaction) -> CardRef:
        ref = await super().post_card(interaction)
        assert self._tg is not None, "bind() the port before use"
        self._tg.start_soon(self._decide, interaction.id)
        return ref

    async def finish_card(self, ref: CardRef, interaction: Interaction, outcome: Outcome) -> None:
        if self._finish_delay:
            await anyio.sleep(self._finish_delay)  # the platform's round trip, modelled
        await super().finish_card(ref, interaction, outcome)

    async def _decide(self, interaction_id: str) -> None:
        assert self._host is not None
        result = await self._host.decide(DecisionIn(interaction_id, self._actor, "accept", self._content))
        if result.verdict.value != "claimed":
            self.refused += 1

    def forget(self) -> None:
        """Drop what the fake platform recorded, so a long run does not grow it."""
        self.results.clear()
        self.messages.clear()
        self.cards.clear()
        self.finished.clear()
        self.finish_calls.clear()


class CountingPort(ResultsPort):
    """A chat port that sets `all_open` when the `target`-th card is posted (nobody answers)."""

    def __init__(self, target: int) -> None:
        super().__init__()
        self.target = target
        self.opened = 0
        self.all_open = anyio.Event()

    def reset(self) -> None:
        """Forget every card so far (after a warm-up) and count from zero again."""
        self.opened = 0
        self.all_open = anyio.Event()
        self.results.clear()
        self.cards.clear()
        self.finished.clear()
        self.finish_calls.clear()

    async def post_card(self, interaction: Interaction) -> CardRef:
        ref = await super().post_card(interaction)
        self.opened += 1
        if self.opened == self.target:
            self.all_open.set()
        return ref


def rss() -> int:
    """Resident memory of this process in bytes, after a full garbage collection."""
    gc.collect()
    return int(psutil.Process().memory_info().rss)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def p90(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]
