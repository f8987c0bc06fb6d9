"""A scripted HTTP server that speaks just enough of the OpenAI and Anthropic wire formats.

The real SDK clients talk to it over TCP, so the tests cover what the SDKs put on
the wire and how they parse answers, retries and errors included. Each test queues
the replies it wants (`reply`) and then inspects what arrived (`requests`).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import anyio
from aiohttp import web

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    hang: bool = False
    """Never answer (until the test ends): drives the client into its timeout."""


@dataclass(frozen=True)
class Recorded:
    path: str
    headers: dict[str, str]
    """Lower-cased names."""
    body: dict[str, Any]


@dataclass
class FakeLLMServer:
    requests: list[Recorded] = field(default_factory=list)
    _replies: deque[Reply] = field(default_factory=deque)
    _release: anyio.Event = field(default_factory=anyio.Event)
    _runner: web.AppRunner | None = None
    port: int = 0

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post(OPENAI_PATH, self._handle)
        app.router.add_post(ANTHROPIC_PATH, self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        self._release.set()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pending_replies(self) -> list[Reply]:
        return list(self._replies)

    def reset(self) -> None:
        self._release.set()  # let a hung handler from the previous test finish
        self._release = anyio.Event()
        self.requests.clear()
        self._replies.clear()

    def reply(self, *replies: Reply) -> None:
        self._replies.extend(replies)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(
            Recorded(request.path, {k.lower(): v for k, v in request.headers.items()}, await request.json())
        )
        if not self._replies:
            return web.json_response({"error": {"message": "no scripted reply"}}, status=599)
        reply = self._replies.popleft()
        if reply.hang:
            await self._release.wait()
        return web.json_response(reply.body, status=reply.status, headers=reply.headers)


# Retry-After in milliseconds: both SDKs honour `retry-after-ms` first, and a plain
# `retry-after: 0` would make them fall back to ~0.5 s of exponential backoff.
RETRY_NOW = {"retry-after": "0", "retry-after-ms": "1"}


def openai_completion(
    content: str | None = "Hello", *, finish_reason: str = "stop", tool_calls: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls is not None:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-test-2026-01-01",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
    }


def openai_tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def openai_error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def anthropic_message(content: list[dict[str, Any]], *, stop_reason: str = "end_turn") -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test-2026-01-01",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 2},
    }


def anthropic_error(message: str, kind: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}
