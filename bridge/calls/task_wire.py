"""The task requests of MCP 2025-11-25 (task augmentation), sent through a live SDK session.

`mcp` 2.3.0 defines the task types but drives none of them, and its `send_request` checks every `tools/call` answer
against `CallToolResult`: a task-augmented call answers `CreateTaskResult`, so that one request goes out through the
session's dispatcher with the same stamp (protocol headers) `send_request` adds, and its answer is read here. The
other requests (`tasks/get`, `tasks/result`, `tasks/cancel`) are outside the SDK's method tables, so its own
`send_request` sends them and the result types given here read the answers.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from typing import Any

import httpx2
from mcp import MCPError
from mcp.client.session import ClientSession
from mcp.types import (
    CallToolRequest,
    CallToolRequestParams,
    CallToolResult,
    CancelTaskRequest,
    CancelTaskRequestParams,
    CancelTaskResult,
    CreateTaskResult,
    GetTaskPayloadRequest,
    GetTaskPayloadRequestParams,
    GetTaskRequest,
    GetTaskRequestParams,
    GetTaskResult,
    ServerCapabilities,
    TaskMetadata,
    Tool,
)

from bridge.errors import BridgeError
from bridge.text.plain import shorten

LEGACY_VERSION = "2025-11-25"
"""Tasks are of this protocol version (2026-07-28 moved them to an extension)."""


def server_runs_tool_tasks(capabilities: ServerCapabilities | None) -> bool:
    """Whether the server takes `tools/call` as a task (`tasks.requests.tools.call`)."""
    tasks = capabilities.tasks if capabilities is not None else None
    requests = tasks.requests if tasks is not None else None
    return requests is not None and requests.tools is not None and requests.tools.call is not None


def task_support(tool: Tool | None) -> str:
    """`forbidden`, `optional` or `required` (absent means forbidden)."""
    support = tool.execution.task_support if tool is not None and tool.execution is not None else None
    return support or "forbidden"


async def create(session: ClientSession, name: str, arguments: dict[str, Any], ttl_ms: int | None,
                 meta: dict[str, Any] | None = None) -> CreateTaskResult | CallToolResult:
    """Call a tool as a task. A server may still answer at once with the tool's result (it chose not to make a
    task); then that result is returned."""
    request = CallToolRequest(params=CallToolRequestParams(name=name, arguments=arguments,
                                                           task=TaskMetadata(ttl=ttl_ms), _meta=meta))  # type: ignore[arg-type]
    data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
    opts: Any = {}
    session._stamp(data, opts)  # the protocol headers send_request would add
    raw = await session._dispatcher.send_raw_request(data["method"], data.get("params"), opts)
    if isinstance(raw, dict) and "task" in raw:
        return CreateTaskResult.model_validate(raw, by_name=False)
    return CallToolResult.model_validate(raw, by_name=False)


async def get(session: ClientSession, task_id: str) -> GetTaskResult:
    return await session.send_request(GetTaskRequest(params=GetTaskRequestParams(task_id=task_id)), GetTaskResult)


async def result(session: ClientSession, task_id: str) -> CallToolResult:
    """`tasks/result`: blocks at the server until the task ends; requests tied to the task (an elicitation while it
    is `input_required`) come to this client meanwhile, on this request's stream."""
    return await session.send_request(
        GetTaskPayloadRequest(params=GetTaskPayloadRequestParams(task_id=task_id)), CallToolResult)


async def cancel(session: ClientSession, task_id: str) -> CancelTaskResult:
    return await session.send_request(CancelTaskRequest(params=CancelTaskRequestParams(task_id=task_id)),
                                      CancelTaskResult)


class HttpLink:
    """A task's requests after a restart, on the HTTP session the task is bound to (its `Mcp-Session-Id`, stored
    with the task). The SDK's client always opens a new session, and a server such as the reference one keeps a
    task only for the session that created it, so these few requests are sent as plain JSON-RPC posts with the
    stored session id. It cannot answer a request the server sends on a response stream (input a task needs): it
    says so instead (`NeedsInput`)."""

    answers_input = False

    def __init__(self, url: str, headers: Mapping[str, str], session_id: str) -> None:
        self._url = url
        self._headers = {**headers, "Mcp-Session-Id": session_id, "MCP-Protocol-Version": LEGACY_VERSION,
                         "Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        self._ids = itertools.count(1)

    async def get(self, task_id: str) -> GetTaskResult:
        return GetTaskResult.model_validate(await self._post("tasks/get", {"taskId": task_id}), by_name=False)

    async def result(self, task_id: str) -> CallToolResult:
        return CallToolResult.model_validate(await self._post("tasks/result", {"taskId": task_id}), by_name=False)

    async def cancel(self, task_id: str) -> CancelTaskResult:
        return CancelTaskResult.model_validate(await self._post("tasks/cancel", {"taskId": task_id}), by_name=False)

    async def _post(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        request_id = next(self._ids)
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        try:
            async with httpx2.AsyncClient(timeout=httpx2.Timeout(30.0, read=None)) as http, \
                    http.stream("POST", self._url, json=body, headers=self._headers) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise TaskLinkError(f"the server answered HTTP {response.status_code} "
                                        f"({shorten(response.text, 200)})")
                if response.headers.get("Content-Type", "").startswith("text/event-stream"):
                    return await _from_events(response, request_id)
                return _answer(json.loads(await response.aread()))
        except httpx2.HTTPError as exc:
            raise TaskLinkError(f"the server could not be reached ({type(exc).__name__})") from exc
        except ValueError as exc:  # not JSON, or not the shape of a task's answer
            raise TaskLinkError(f"the server's answer could not be read ({shorten(str(exc), 200)})") from exc


class TaskLinkError(BridgeError):
    """A task's request after a restart failed (the server gone, or its session with it)."""


class NeedsInput(TaskLinkError):
    """The server asked for input on a task picked up after a restart: nothing here can answer it."""


async def _from_events(response: httpx2.Response, request_id: int) -> dict[str, Any]:
    data: list[str] = []
    async for line in response.aiter_lines():
        if line.startswith("data:"):
            data.append(line[5:].strip())
            continue
        if line.strip() or not data:
            continue
        text, data = "\n".join(data), []
        if not text:  # a priming event (an id to resume from, no message)
            continue
        message = json.loads(text)
        if isinstance(message, dict) and message.get("id") == request_id and "method" not in message:
            return _answer(message)
        if isinstance(message, dict) and "method" in message and "id" in message:
            raise NeedsInput(f"the server asks for input ({shorten(str(message.get('method')), 60)})")
    raise TaskLinkError("the server ended its answer without one")


def _answer(message: Any) -> dict[str, Any]:
    if not isinstance(message, dict):
        raise TaskLinkError("the server's answer is not JSON-RPC")
    if isinstance(error := message.get("error"), dict):
        raise MCPError(code=int(error.get("code", 0)), message=str(error.get("message", "")), data=error.get("data"))
    result = message.get("result")
    if not isinstance(result, dict):
        raise TaskLinkError("the server's answer carries no result")
    return result
