"""The task requests of MCP 2025-11-25 (task augmentation), sent through a live SDK session.

`mcp` 2.3.0 defines the task types but drives none of them, and its `send_request` checks every `tools/call` answer
against `CallToolResult`: a task-augmented call answers `CreateTaskResult`, so that one request goes out through the
session's dispatcher with the same stamp (protocol headers) `send_request` adds, and its answer is read here. The
other requests (`tasks/get`, `tasks/result`, `tasks/cancel`) are outside the SDK's method tables, so its own
`send_request` sends them and the result types given here read the answers.
"""

from __future__ import annotations

from typing import Any

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
