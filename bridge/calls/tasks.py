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
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import anyio
from mcp import MCPError
from mcp.types import CallToolResult, CancelTaskResult, CreateTaskResult, GetTaskResult

from bridge.calls import task_wire as wire
from bridge.calls.session_death import guarded
from bridge.calls.store_roles import TaskCallStore
from bridge.calls.task_status import TERMINAL, Seen, card_text, changed, poll_seconds
from bridge.cards.chat import Outbound
from bridge.config.file import ServerConfig
from bridge.door.model import Actor, ConversationKey, Interaction, MessageRef
from bridge.errors import BridgeError
from bridge.safety.limits import Limits
from bridge.servers.mcp_session import Session
from bridge.servers.sessions import SessionPool
from bridge.storage import StoredTask
from bridge.text.plain import shorten

logger = logging.getLogger(__name__)

Show = Callable[[str, bool], Awaitable[MessageRef | None]]
"""Post or edit the call's status card: (text, done) -> the card."""


class TaskLink(Protocol):
    """Where a task's requests go: the live session that created it, or (after a restart) its HTTP session."""

    answers_input: bool
    """Whether requests the server sends on `tasks/result`'s stream (input the task needs) are answered."""

    async def get(self, task_id: str) -> GetTaskResult: ...

    async def result(self, task_id: str) -> CallToolResult: ...

    async def cancel(self, task_id: str) -> CancelTaskResult: ...


class SessionLink:
    """A task's requests on the live session that created it; its handlers answer what the server asks."""

    answers_input = True

    def __init__(self, pool: SessionPool, session: Session) -> None:
        self._pool = pool
        self._session = session

    async def get(self, task_id: str) -> GetTaskResult:
        result: GetTaskResult = await guarded(self._pool, self._session, wire.get(self._client(), task_id))
        return result

    async def result(self, task_id: str) -> CallToolResult:
        result: CallToolResult = await guarded(self._pool, self._session, wire.result(self._client(), task_id))
        return result

    async def cancel(self, task_id: str) -> CancelTaskResult:
        result: CancelTaskResult = await guarded(self._pool, self._session, wire.cancel(self._client(), task_id))
        return result

    def _client(self) -> Any:
        assert self._session.client is not None
        return self._session.client.session


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
    link: TaskLink
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
    told_input: bool = False
    card: MessageRef | None = None

    def elapsed(self) -> float:
        return max(0.0, time.time() - self.started)

    def expired(self) -> bool:
        return self.ttl_ms is not None and self.elapsed() * 1000 > self.ttl_ms

    def waiting_for(self) -> str:
        return f"an answer from {self.requester.label()}" if self.requester is not None else ""


class Cards(Protocol):
    """The open cards (the broker's), so a task's own cards end with it."""

    def open_interactions(self, conversation: ConversationKey | None = None) -> list[Interaction]: ...

    def withdraw(self, interaction_id: str, reason: str) -> None: ...


class TaskCalls:
    """Runs tool calls as tasks, and knows the ones running in this process (bounds, Stop)."""

    def __init__(self, pool: SessionPool, out: Outbound, limits: Limits, store: TaskCallStore,
                 servers: Mapping[str, ServerConfig], cards: Cards | None = None) -> None:
        self._cards = cards
        self._pool = pool
        self._out = out
        self._limits = limits
        self._store = store
        self._servers = servers
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
                      SessionLink(self._pool, session), ttl_ms=task.ttl, poll_interval_ms=task.poll_interval)
        session.calls[call.id] = run
        self.running[call.id] = run  # stoppable (as a task) from the moment its card can be seen
        try:
            # Durable before it is shown: a restart picks the task up (or says it was lost). The task's row replaces
            # the call's record of running, which would only say "interrupted".
            row = StoredTask(call.id, task.task_id, call.server, call.tool, call.conversation, call.requester,
                             task.status, task.status_message or "", None,
                             session.bound.http_session if session.bound else "", run.started)
            await self._store.record_task(row)
            await self._store.end_running_call(call.id)
            await self._store.flush()
            await self._show(run, show, task.status, task.status_message)
            if run.card is not None:  # behind, with the next batch: lost with a crash, the card is posted anew
                await self._store.record_task(replace(row, card=run.card))
            return await self._kept(run, show)
        finally:
            if call.id in self.running and session.bound is not None:
                # Cut short (a shutdown) with its row kept: the next start follows it on this HTTP session.
                session.bound.keep_for_task()
            self.running.pop(call.id, None)
            session.calls.pop(call.id, None)
            self._pool.released(session)

    async def resume(self, row: StoredTask, show: Show) -> CallToolResult:
        """Follow a task an earlier run of the bridge started (its row taken over at start), on its status card:
        on the HTTP session it is bound to, or, where the server cannot know it any more, the conversation is told
        once that it was lost."""
        cfg = self._servers.get(row.server)
        name = f"{row.server}.{row.tool}"
        why = ""
        link: wire.HttpLink | None = None
        if cfg is None or cfg.disabled:
            why = "its server is no longer configured"
        elif not cfg.url or not row.http_session:
            why = ("its server runs as a process of the bridge (stdio) and was started again with it, so it no longer "
                   "knows the task")
        else:
            link = wire.HttpLink(cfg.url, cfg.headers, row.http_session)
            try:
                await link.get(row.task_id)
            except (MCPError, BridgeError) as exc:
                why = f"the server no longer knows it ({shorten(str(exc), 200)})"
        if why or link is None:
            await self._store.end_task(row.call_id)
            await show(f"task lost when the bridge restarted: {why}", True)
            await self._out.say(row.conversation, f"{name}: the task was lost when the bridge restarted: {why}.")
            raise TaskTold
        run = TaskRun(row.call_id, row.conversation, row.requester, row.server, row.tool, row.task_id, link,
                      started=row.started_at, seen=Seen(row.status, row.status_message), card=row.card)
        logger.info("picked up task %s of %s again", row.task_id, name)
        return await self._kept(run, show)

    async def _kept(self, run: TaskRun, show: Show) -> CallToolResult:
        """Follow a recorded task; its row goes with its end (not with a shutdown: the next start picks it up)."""
        self.running[run.call_id] = run
        ended = False
        try:
            result = await self._follow(run, show)
            ended = True
            return result
        except Exception:
            ended = True
            raise
        finally:
            if ended:  # not at a shutdown: its cards end as shut down, and its row stays for the next start
                self.running.pop(run.call_id, None)
                self._withdraw_cards(run)
                with anyio.CancelScope(shield=True):
                    await self._store.end_task(run.call_id)
            logger.info("task %s of %s.%s: %d tasks/get, %d status card edits", run.task, run.server, run.tool,
                        run.gets, run.edits)

    def _withdraw_cards(self, run: TaskRun) -> None:
        """Cards of the task still open when it ended (a question it asked before it was stopped): nobody waits for
        their answer any more."""
        if self._cards is None:
            return
        label = task_label({run.call_id: run}, run.task)
        for interaction in self._cards.open_interactions(run.conversation):
            if any(d.label == "Task" and d.text == label for d in interaction.details):
                self._cards.withdraw(interaction.id, "the task it belongs to ended")

    async def stop(self, call_id: str, actor: Actor) -> bool:
        """Stop a task: `tasks/cancel`, and the server's answer kept for the card and the conversation."""
        run = self.running.get(call_id)
        if run is None:
            return False
        run.stopped_by = actor
        try:
            answer = await run.link.cancel(run.task)
            run.stop_answer = f"the server reports the task {answer.status}" + (
                f" ({shorten(answer.status_message, 200)})" if answer.status_message else "")
        except (MCPError, BridgeError) as exc:
            message = exc.error.message if isinstance(exc, MCPError) else str(exc)
            run.stop_answer = f"the server refused to cancel it: {shorten(message, 300)}"
        run.wake.set()
        return True

    # -- following one task ----------------------------------------------------------------------------------------

    async def _follow(self, run: TaskRun, show: Show) -> CallToolResult:
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
                    got = await run.link.get(run.task)
                    run.gets += 1
                    if got.poll_interval is not None:
                        run.poll_interval_ms = got.poll_interval
                    status = got.status
                    await self._show(run, show, status, got.status_message)
                    if status != "input_required":
                        continue
                    if run.link.answers_input and not run.fetching:
                        run.fetching = True
                        tg.start_soon(self._fetch, run)
                    elif not run.link.answers_input and not run.told_input:
                        run.told_input = True
                        await self._out.say(run.conversation, f"{run.server}.{run.tool} needs an answer, which "
                                            "cannot be asked for a task picked up after a restart; `stop` ends it.")
                result = await self._ended(run, show, status)
            except Exception as exc:  # noqa: BLE001 (raised below, outside the task group, as itself)
                failure = exc
            finally:
                tg.cancel_scope.cancel()
        if failure is not None:
            raise failure
        assert result is not None
        return result

    async def _fetch(self, run: TaskRun) -> None:
        """`tasks/result`, held open while the task needs input: its requests come on this stream."""
        try:
            run.result = await run.link.result(run.task)
        except Exception as exc:  # noqa: BLE001 (any failure of the held request is reported by the driver, once the task's end is known)
            run.result_error = exc
        run.wake.set()

    async def _ended(self, run: TaskRun, show: Show, status: str) -> CallToolResult:
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
            try:
                result = await run.link.result(run.task)
            except (MCPError, BridgeError) as exc:
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
            await self._store.task_status(run.call_id, status, message or "")
        card = await show(text, status in TERMINAL)
        run.card = run.card or card


def task_label(runs: Mapping[str, Any], task_id: str) -> str:
    """How a card names the task it belongs to."""
    for run in runs.values():
        if isinstance(run, TaskRun) and run.task == task_id:
            return f"{run.tool} (task {shorten(task_id, 40)})"
    return f"task {shorten(task_id, 40)}"
