"""Tool calls that run as tasks (MCP 2025-11-25 task augmentation): the client's driver the SDK does not have.

A tool whose `execution.taskSupport` is `required` (or `optional`, on a server configured `tasks: prefer`) is called
with a `task` parameter; the server answers `CreateTaskResult` at once and works on. The conversation gets one status
card for the task: the server's status message as it changes, read with `tasks/get` at the server's `pollInterval`
(never faster than `limits.task_poll_floor_ms`), and the time since it began, with a Stop that sends `tasks/cancel`.
The SDK drops `notifications/tasks/status` (outside its method tables) unless a client extension binds it, which
would advertise a capability the bridge does not have, so polling is the one source.

When the task needs input (`input_required`) the driver calls `tasks/result`, which the server holds open until the
task ends and on whose stream it sends the request tied to the task (`relatedTask`): the session's handlers answer it
like any other, on a card labelled with the task. On `completed` the result is the call's result; `failed` and
`cancelled` are said in the conversation.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
from mcp import MCPError
from mcp.types import CallToolResult, CreateTaskResult, GetTaskResult

from bridge.calls import task_wire as wire
from bridge.calls.rounds import guarded
from bridge.calls.task_status import TERMINAL, Seen, card_text, changed, poll_seconds
from bridge.cards.outbound import Outbound
from bridge.model import Actor, ConversationKey
from bridge.safety.limits import Limits
from bridge.servers.mcp_session import Session
from bridge.servers.sessions import SessionPool
from bridge.text.plain import shorten

logger = logging.getLogger(__name__)

Show = Callable[[str, bool], Awaitable[None]]
"""Post or edit the call's status card: (text, done)."""


class TaskTold(Exception):
    """The task ended without a result to report, and its conversation has been told how (failed, cancelled, lost)."""


class CallLike(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def conversation(self) -> ConversationKey: ...

    @property
    def requester(self) -> Actor | None: ...

    @property
    def server(self) -> str: ...

    @property
    def tool(self) -> str: ...


@dataclass(eq=False)
class TaskRun:
    """One task in flight. Registered on its session as the call's `CallInfo`, so a request the server ties to the
    task (`relatedTask`) reaches this conversation and names the task on its card."""

    call_id: str
    conversation: ConversationKey
    requester: Actor | None
    server: str
    tool: str
    task: str
    """The server's task id."""
    started: float = field(default_factory=time.time)
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None
    seen: Seen | None = None
    gets: int = 0
    """`tasks/get` requests sent for it."""
    edits: int = 0
    """Status card edits (the first post not counted)."""
    stopped_by: Actor | None = None
    stop_answer: str = ""
    wake: anyio.Event = field(default_factory=anyio.Event)
    result: CallToolResult | None = None
    result_error: BaseException | None = None
    fetching: bool = False

    def elapsed(self) -> float:
        return max(0.0, time.time() - self.started)

    def expired(self) -> bool:
        return self.ttl_ms is not None and self.elapsed() * 1000 > self.ttl_ms

    def waiting_for(self) -> str:
        return f"an answer from {self.requester.label()}" if self.requester is not None else ""


class TaskCalls:
    """Runs tool calls as tasks, and knows the ones running in this process (bounds, Stop)."""

    def __init__(self, pool: SessionPool, out: Outbound, limits: Limits) -> None:
        self._pool = pool
        self._out = out
        self._limits = limits
        self.running: dict[str, TaskRun] = {}
        """By call id."""

    def refusal(self, conversation: ConversationKey, server: str) -> str | None:
        """Why another task may not start here now (a bound), or None."""
        here = sum(1 for r in self.running.values() if r.conversation == conversation)
        if here >= self._limits.tasks_per_conversation:
            return (f"{here} tasks are running in this conversation already, the most it may run at once "
                    f"(limits.tasks_per_conversation); stop one or wait for one to end")
        there = sum(1 for r in self.running.values() if r.server == server)
        if there >= self._limits.tasks_per_server:
            return (f"{there} tasks are running on {server} already, the most it may run at once "
                    f"(limits.tasks_per_server)")
        return None

    async def run(self, session: Session, call: CallLike, arguments: dict[str, Any], meta: dict[str, Any] | None,
                  show: Show) -> CallToolResult:
        """Call the tool as a task and follow it to its end: its result, or `TaskTold` once the conversation was told
        how it ended otherwise. Session failures (the server died) propagate as for any call."""
        assert session.client is not None
        client = session.client.session
        ttl_ms = self._limits.task_ttl * 1000 if self._limits.task_ttl > 0 else None
        created = await guarded(self._pool, session, wire.create(client, call.tool, arguments, ttl_ms, meta))
        if isinstance(created, CallToolResult):  # the server chose to answer at once
            return created
        assert isinstance(created, CreateTaskResult)
        task = created.task
        run = TaskRun(call.id, call.conversation, call.requester, call.server, call.tool, task.task_id,
                      ttl_ms=task.ttl, poll_interval_ms=task.poll_interval)
        self.running[call.id] = run
        session.calls[call.id] = run
        try:
            await self._show(run, show, task.status, task.status_message)
            return await self._follow(session, run, show)
        finally:
            session.calls.pop(call.id, None)
            self.running.pop(call.id, None)
            self._pool.released(session)
            logger.info("task %s of %s.%s: %d tasks/get, %d status card edits", run.task, run.server, run.tool,
                        run.gets, run.edits)

    async def stop(self, call_id: str, actor: Actor) -> bool:
        """Stop a task: `tasks/cancel`, and the server's answer kept for the card and the conversation."""
        run = self.running.get(call_id)
        session = self._pool.find(run.conversation, run.server, run.requester) if run is not None else None
        if run is None or session is None or session.client is None:
            return False
        run.stopped_by = actor
        try:
            answer = await guarded(self._pool, session, wire.cancel(session.client.session, run.task))
            run.stop_answer = f"the server reports the task {answer.status}" + (
                f" ({shorten(answer.status_message, 200)})" if answer.status_message else "")
        except MCPError as exc:
            run.stop_answer = f"the server refused to cancel it: {shorten(exc.error.message, 300)}"
        run.wake.set()
        return True

    # -- following one task ----------------------------------------------------------------------------------------

    async def _follow(self, session: Session, run: TaskRun, show: Show) -> CallToolResult:
        client = session.client
        assert client is not None
        floor = self._limits.task_poll_floor_ms / 1000
        result: CallToolResult | None = None
        failure: Exception | None = None
        async with anyio.create_task_group() as tg:
            try:
                status = run.seen.status if run.seen is not None else "working"
                while status not in TERMINAL:
                    with anyio.move_on_after(poll_seconds(run.poll_interval_ms, floor)):
                        await run.wake.wait()
                    run.wake = anyio.Event()
                    if run.expired():
                        await show(f"task expired: the server keeps it {run.ttl_ms} ms (its ttl)", True)
                        await self._out.say(run.conversation, f"{run.server}.{run.tool}: the task outlived the time "
                                                              f"the server keeps it (ttl); its result is lost.")
                        raise TaskTold
                    got: GetTaskResult = await guarded(self._pool, session, wire.get(client.session, run.task))
                    run.gets += 1
                    if got.poll_interval is not None:
                        run.poll_interval_ms = got.poll_interval
                    status = got.status
                    await self._show(run, show, status, got.status_message)
                    if status == "input_required" and not run.fetching:
                        run.fetching = True
                        tg.start_soon(self._fetch, session, run)
                result = await self._ended(session, run, show, status)
            except Exception as exc:  # noqa: BLE001 (raised below, outside the task group, as itself)
                failure = exc
            finally:
                tg.cancel_scope.cancel()
        if failure is not None:
            raise failure
        assert result is not None
        return result

    async def _fetch(self, session: Session, run: TaskRun) -> None:
        """`tasks/result`, held open while the task needs input: its requests come on this stream."""
        assert session.client is not None
        try:
            run.result = await guarded(self._pool, session, wire.result(session.client.session, run.task))
        except Exception as exc:  # noqa: BLE001 (any failure of the held request is reported by the driver, once the task's end is known)
            run.result_error = exc
        run.wake.set()

    async def _ended(self, session: Session, run: TaskRun, show: Show, status: str) -> CallToolResult:
        name = f"{run.server}.{run.tool}"
        if status == "cancelled":
            if run.stopped_by is not None:
                await self._out.say(run.conversation, f"Stopped {name} (by {run.stopped_by.label()}): "
                                                      f"{run.stop_answer or 'the server reports the task cancelled'}.")
            else:
                await self._out.say(run.conversation, f"{name}: the server cancelled the task"
                                    + (f" ({run.seen.message})" if run.seen and run.seen.message else "") + ".")
            raise TaskTold
        result = run.result
        if result is None and run.fetching:
            with anyio.fail_after(60):  # the server ends the held tasks/result as the task ends
                while run.result is None and run.result_error is None:
                    await run.wake.wait()
                    run.wake = anyio.Event()
            result = run.result
        if result is None and run.result_error is None:
            assert session.client is not None
            try:
                result = await guarded(self._pool, session, wire.result(session.client.session, run.task))
            except MCPError as exc:
                run.result_error = exc
        if result is not None:
            return result
        if status == "failed":
            why = run.seen.message if run.seen and run.seen.message else "no reason given"
            await self._out.say(run.conversation, f"{name}: the task failed: {why}.")
            raise TaskTold
        assert run.result_error is not None
        raise run.result_error

    async def _show(self, run: TaskRun, show: Show, status: str, message: str | None) -> None:
        if not changed(run.seen, status, message):
            return
        first = run.seen is None
        run.seen = Seen(status, message or "")
        text = card_text(status, message, run.elapsed(), run.waiting_for() if status == "input_required" else "")
        if status in TERMINAL and run.stopped_by is not None:
            text += f" (stopped by {run.stopped_by.label()})"
        if not first:
            run.edits += 1
        await show(text, status in TERMINAL)


def task_label(runs: Mapping[str, Any], task_id: str) -> str:
    """How a card names the task it belongs to."""
    for run in runs.values():
        if isinstance(run, TaskRun) and run.task == task_id:
            return f"{run.tool} (task {shorten(task_id, 40)})"
    return f"task {shorten(task_id, 40)}"
