"""A 2025-11-25 server that asks the client to run its elicitation as a task (as server-everything's
`trigger-elicitation-request-async` does), with what that tool never does: cancelling the task, and reading a task by
id from another session (any worker of the bridge may be asked for a task another one runs).

Tools:
- `ask_task(ttl_ms, cancel_after_polls)`: send `elicitation/create` with `task`, poll `tasks/get` until the task ends
  (or cancel it with `tasks/cancel` after that many polls), then read `tasks/result`; report each step as JSON.
- `start_task()`: send the elicitation as a task and return its id at once (the poll is someone else's).
- `poll_task(task_id)`: one `tasks/get` and, if the task ended, `tasks/result`, on this session.
- `cancel_task(task_id)`: one `tasks/cancel`, on this session.
- `capabilities()`: the `tasks` capability the client declared.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from mcp import MCPError
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CancelTaskResult, CreateTaskResult, ElicitRequestFormParams, GetTaskResult, TaskMetadata

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "title": "A number"}}, "required": ["n"]}
ENDED = ("completed", "failed", "cancelled")


def task_asker(name: str = "tasks") -> MCPServer:
    server = MCPServer(name)

    async def send(ctx: Context, method: str, params: dict[str, Any]) -> dict[str, Any]:
        # The raw request channel: the SDK's typed `send_request` checks an answer to elicitation/create as an
        # ElicitResult (its server has no tasks either), and a CreateTaskResult is the answer wanted here.
        outbound = ctx.session._request_outbound  # pyright: ignore[reportPrivateUsage]
        return dict(await outbound.send_raw_request(method, params))

    async def create(ctx: Context, ttl_ms: int) -> CreateTaskResult:
        params = ElicitRequestFormParams(message="Pick a number (asked as a task)", requested_schema=SCHEMA,
                                         task=TaskMetadata(ttl=ttl_ms))
        sent = params.model_dump(by_alias=True, mode="json", exclude_none=True)
        return CreateTaskResult.model_validate(await send(ctx, "elicitation/create", sent))

    async def get(ctx: Context, task_id: str) -> GetTaskResult:
        return GetTaskResult.model_validate(await send(ctx, "tasks/get", {"taskId": task_id}))

    async def cancel(ctx: Context, task_id: str) -> CancelTaskResult:
        return CancelTaskResult.model_validate(await send(ctx, "tasks/cancel", {"taskId": task_id}))

    async def result(ctx: Context, task_id: str) -> dict[str, Any]:
        try:
            return await send(ctx, "tasks/result", {"taskId": task_id})
        except MCPError as exc:
            return {"error": {"code": exc.error.code, "message": exc.error.message}}

    @server.tool()
    async def ask_task(ctx: Context, ttl_ms: int = 600000, cancel_after_polls: int = 0) -> str:
        """Ask for a number as a task; poll until it ends (cancelling it after some polls if asked)."""
        created = await create(ctx, ttl_ms)
        task_id, statuses = created.task.task_id, [str(created.task.status)]
        report: dict[str, Any] = {"created": created.task.status, "poll_interval": created.task.poll_interval,
                                  "ttl": created.task.ttl}
        polls = 0
        status = created.task.status
        while status not in ENDED:
            await anyio.sleep(0.2)
            polls += 1
            try:
                got = await get(ctx, task_id)
            except MCPError as exc:  # gone: past its TTL
                report.update(statuses=statuses, polls=polls, gone=exc.error.code)
                return json.dumps(report)
            status = got.status
            statuses.append(f"{got.status}: {got.status_message}")
            if cancel_after_polls and polls == cancel_after_polls:
                cancelled = await cancel(ctx, task_id)
                report["cancel"] = cancelled.status
                status = cancelled.status
                try:
                    await cancel(ctx, task_id)
                except MCPError as exc:
                    report["cancel_again"] = exc.error.code
        report["statuses"] = list(dict.fromkeys(statuses))
        report["polls"] = polls
        report["final"] = (await get(ctx, task_id)).model_dump(by_alias=True, exclude_none=True)
        report["result"] = await result(ctx, task_id)
        return json.dumps(report)

    @server.tool()
    async def capabilities(ctx: Context) -> str:
        """The task capabilities the client declared."""
        declared = ctx.client_capabilities
        tasks = declared.tasks if declared is not None else None
        return json.dumps(tasks.model_dump(by_alias=True, exclude_none=True) if tasks is not None else None)

    @server.tool()
    async def start_task(ctx: Context) -> str:
        """Ask for a number as a task and return its id at once."""
        return (await create(ctx, 600000)).task.task_id

    @server.tool()
    async def poll_task(ctx: Context, task_id: str) -> str:
        """One tasks/get for a task (and its result if it ended)."""
        try:
            got = await get(ctx, task_id)
        except MCPError as exc:
            return json.dumps({"error": {"code": exc.error.code, "message": exc.error.message}})
        report: dict[str, Any] = {"status": got.status, "message": got.status_message}
        if got.status in ENDED:
            report["result"] = await result(ctx, task_id)
        return json.dumps(report)

    @server.tool()
    async def cancel_task(ctx: Context, task_id: str) -> str:
        """tasks/cancel for a task, on this session."""
        try:
            cancelled = await cancel(ctx, task_id)
        except MCPError as exc:
            return json.dumps({"error": {"code": exc.error.code, "message": exc.error.message}})
        return json.dumps({"status": cancelled.status, "message": cancelled.status_message})

    return server
