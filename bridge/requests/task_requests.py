"""Tasks the bridge runs for a server: an elicitation or sampling request a 2025-11-25 server sends as a task.

The server gets `CreateTaskResult` at once and no request is held open; the request is answered exactly as it would
have been otherwise (the same handler, the same cards) in a task of this part's own, and the server asks later:

- `tasks/get` answers from the task's stored row, so any worker can answer for a task another one runs: `working`,
  `input_required` while a card waits for people (the status message says for whom), then `completed` (the
  request's result: for an elicitation that includes a decline, or a cancel when nobody answered in time), `failed`
  (the request's error: a sampling request a person denied or let expire, say) or `cancelled`.
- `tasks/result` waits for the end, then gives the result (with the `related-task` metadata) or the request's error.
- `tasks/cancel` ends the task: its open card is withdrawn (the card says so) and the task is `cancelled` before the
  answer goes back.

Each task is a row of `bridge.storage.served_tasks`; its card is a stored card like any other. Bounds: at most
`limits.served_tasks_per_server` tasks going for one server (over all workers), and a TTL of at most
`limits.served_task_ttl`: when it passes, the card is withdrawn and the task is gone. A task runs on the worker that
received the request; when that process stops, its cards end as any legacy card does and the task fails ("the bridge
stopped"), which a server asking another worker is told.
"""

from __future__ import annotations

import contextvars
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Protocol

import anyio
from anyio.abc import TaskGroup, TaskStatus
from mcp.client import ClientRequestContext
from mcp.types import CancelTaskResult, CreateTaskResult, ErrorData, GetTaskResult, Task, TaskMetadata

from bridge.door.model import Detail, Interaction, Outcome, Status
from bridge.errors import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST
from bridge.requests.request_context import CURRENT, NOBODY_TO_ASK, Asker, ContextSource, RequestContext
from bridge.safety.limits import Limits
from bridge.servers.task_client import Answer, TaskHost, wire
from bridge.storage import StoredInteraction
from bridge.storage.api import CardStore
from bridge.storage.served_tasks import ServedTask, ServedTaskStore
from bridge.text.plain import shorten

logger = logging.getLogger(__name__)

POLL_INTERVAL_MS = 2000
"""What the bridge suggests between a server's `tasks/get`: a person answers in seconds at best."""
OTHER_WORKER_POLL = 1.0
"""Seconds between looks at the store while `tasks/result` waits for a task another worker runs."""
RELATED_TASK = "io.modelcontextprotocol/related-task"
STOPPED = "the bridge stopped before this was answered; ask again"
NOT_FOUND = "Task not found (unknown, another server's, or past its TTL)"
CANCELLED_BY_SERVER = "the server cancelled its request"
TTL_PASSED = "its time to live passed before it was answered"
TASK_NOTE = "the server checks back for the answer; nothing is held open meanwhile"


@dataclass(eq=False)
class _Running:
    """A task running in this process."""

    task_id: str
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    done: anyio.Event = field(default_factory=anyio.Event)
    interaction: str | None = None
    """Its card open now, if any."""
    outcome: Outcome | None = None
    """How its last card ended."""
    cancelled: bool = False
    """Its work was stopped: the server cancelled it, or its TTL passed (`expired`)."""
    expired: bool = False


RUNNING: contextvars.ContextVar[_Running | None] = contextvars.ContextVar("bridge_served_task", default=None)
"""The task whose request is being answered in this (anyio) task: its cards are the task's."""


class TaskRequestStore(ServedTaskStore, CardStore, Protocol):
    """What served tasks need of the store: the tasks, and the cards they wait on (answered on any worker)."""


class Cards(Protocol):
    """The broker, as far as ending a task's card goes."""

    def interaction(self, interaction_id: str) -> Interaction | None: ...
    def withdraw(self, interaction_id: str, reason: str) -> None: ...
    async def retire(self, stored: StoredInteraction, reason: str, status: Status = Status.CANCELLED, *,
                     continuing: bool = False) -> bool: ...


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")


def task_view(row: ServedTask) -> dict[str, Any]:
    """The protocol's `Task` for a row."""
    return wire(Task(task_id=row.id, status=row.status, status_message=row.status_message or None,
                     created_at=_iso(row.created_at), last_updated_at=_iso(row.updated_at), ttl=row.ttl_ms,
                     poll_interval=POLL_INTERVAL_MS))


def _waiting(interaction: Interaction) -> str:
    if interaction.groups:
        return f"waiting for {', '.join(interaction.groups)} to answer"
    return "waiting for a person to answer"


def _completed(row: ServedTask, answer: dict[str, Any], outcome: Outcome | None) -> str:
    if row.kind != "elicitation/create":
        return "answered"
    action = answer.get("action")
    if action == "accept":
        return "answered"
    if action == "decline":
        return "declined by a person"
    if outcome is not None and outcome.status is Status.EXPIRED:
        return "nobody answered in time"
    return "cancelled" + (f": {outcome.reason}" if outcome is not None and outcome.reason else "")


class ServedTasks:
    """Every task the bridge runs for servers in this process, and the answers for any task on the store."""

    def __init__(self, store: TaskRequestStore, limits: Limits, contexts: ContextSource, cards: Cards) -> None:
        self._store = store
        self._limits = limits
        self._contexts = contexts
        self._cards = cards
        self._running: dict[str, _Running] = {}
        self._tg: TaskGroup | None = None
        self.polls = 0
        """`tasks/get` answered by this process (the figure a long task's polling costs)."""
        self._polled = anyio.Event()
        self._ended = anyio.Event()

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run tasks until cancelled. An earlier process of this worker left its tasks without anyone to run them:
        they end as failed first."""
        ended = await self._store.end_served_tasks(STOPPED)
        if ended:
            logger.info("%d tasks run for servers by the last process ended as failed", ended)
        async with anyio.create_task_group() as tg:
            self._tg = tg
            task_status.started()
            try:
                await anyio.sleep_forever()
            finally:
                self._tg = None

    def for_server(self, server: str) -> TaskHost:
        return _ServerTasks(self, server)

    def asker(self, inner: Asker) -> Asker:
        """The handlers' asker: a card asked for a task moves the task to `input_required` until it ends."""
        return _TaskAsker(self, inner)

    async def wait_polls(self, count: int) -> None:
        """Wait until this process has answered `count` tasks/get in all."""
        while self.polls < count:
            await self._polled.wait()

    async def wait_idle(self) -> None:
        """Wait until no task runs in this process."""
        while self._running:
            await self._ended.wait()

    # -- the four requests ---------------------------------------------------------------------------------------

    async def create(self, server: str, context: ClientRequestContext, method: str, task: TaskMetadata,
                     run: Callable[[], Awaitable[Answer]]) -> CreateTaskResult | ErrorData:
        ctx = CURRENT.get() or self._contexts.resolve(context)
        if ctx is None:
            return ErrorData(code=INVALID_REQUEST, message=NOBODY_TO_ASK)
        tg = self._tg
        if tg is None:
            return ErrorData(code=INTERNAL_ERROR, message="The bridge is not running tasks now")
        most_ms = self._limits.served_task_ttl * 1000
        ttl_ms = min(task.ttl, most_ms) if task.ttl is not None and task.ttl > 0 else most_ms
        now = time.time()
        row = ServedTask(secrets.token_urlsafe(16), server, method, ctx.conversation.id(), "working", "", None, None,
                         None, now, now, ttl_ms, now + ttl_ms / 1000, "")
        if not await self._store.create_served_task(row, self._limits.served_tasks_per_server):
            most = self._limits.served_tasks_per_server
            return ErrorData(code=INVALID_REQUEST,
                             message=f"Refused by the bridge: {most} tasks are going for this server already")
        running = _Running(row.id)
        self._running[row.id] = running
        tg.start_soon(self._run, running, ctx, row, run)
        return CreateTaskResult(task=Task.model_validate(task_view(row)))

    async def get(self, server: str, task_id: str) -> Answer:
        self.polls += 1
        self._polled.set()
        self._polled = anyio.Event()
        row = await self._row(server, task_id)
        if row is None:
            return ErrorData(code=INVALID_PARAMS, message=NOT_FOUND)
        return wire(GetTaskResult.model_validate(task_view(row)))

    async def result(self, server: str, task_id: str) -> Answer:
        row = await self._row(server, task_id)
        while row is not None and not row.ended:
            running = self._running.get(task_id)
            if running is not None:
                await running.done.wait()
            else:
                await anyio.sleep(OTHER_WORKER_POLL)  # run by another worker: its row tells when it ends
            row = await self._row(server, task_id)
        if row is None:
            return ErrorData(code=INVALID_PARAMS, message=NOT_FOUND)
        if row.status == "completed" and row.result is not None:
            payload: dict[str, Any] = json.loads(row.result)
            meta = dict(payload.get("_meta") or {})
            meta[RELATED_TASK] = {"taskId": row.id}
            return {**payload, "_meta": meta}
        if row.status == "failed" and row.error is not None:
            return ErrorData.model_validate(json.loads(row.error))
        return ErrorData(code=INVALID_REQUEST, message=f"The task {row.status}: {row.status_message or 'no result'}")

    async def cancel(self, server: str, task_id: str) -> Answer:
        row = await self._row(server, task_id)
        if row is None:
            return ErrorData(code=INVALID_PARAMS, message=NOT_FOUND)
        if row.ended or not await self._store.update_served_task(task_id, "cancelled", "cancelled by the server"):
            return ErrorData(code=INVALID_PARAMS, message="Cannot cancel a task that has ended")
        running = self._running.get(task_id)
        if running is not None:
            self._stop(running, CANCELLED_BY_SERVER)
        elif row.interaction_id is not None:
            # Run by another worker: its card ends through the store, as a click there would (that worker hears the
            # claim and lets its request go); this one shows the card final.
            stored = await self._store.interaction(row.interaction_id)
            if stored is not None and stored.outcome is None:
                await self._cards.retire(stored, CANCELLED_BY_SERVER)
        row = await self._row(server, task_id)
        assert row is not None
        return wire(CancelTaskResult.model_validate(task_view(row)))

    async def _row(self, server: str, task_id: str) -> ServedTask | None:
        row = await self._store.served_task(task_id)
        if row is None or row.server != server or row.gone(time.time()):
            return None  # another server's task is none of this one's business
        return row

    # -- running -------------------------------------------------------------------------------------------------

    def _stop(self, running: _Running, reason: str) -> None:
        """End a running task's work: its open card is withdrawn (the card says why); with none open (a model
        answering, a card about to be posted) its work is cancelled."""
        running.cancelled = True
        card = running.interaction
        if card is not None and self._cards.interaction(card) is not None:
            self._cards.withdraw(card, reason)
        else:
            running.scope.cancel()

    async def _run(self, running: _Running, ctx: RequestContext, row: ServedTask,
                   run: Callable[[], Awaitable[Answer]]) -> None:
        CURRENT.set(ctx)
        RUNNING.set(running)
        answer: Answer | None = None
        try:
            with running.scope:
                async with anyio.create_task_group() as deadline:
                    deadline.start_soon(self._expire, running, row.expires_at)
                    try:
                        answer = await run()
                    except Exception:
                        logger.exception("task %s for %s failed", row.id, row.server)
                        answer = ErrorData(code=INTERNAL_ERROR, message="The bridge failed to answer this request")
                    deadline.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                try:
                    if running.expired:
                        await self._store.update_served_task(row.id, "failed", TTL_PASSED)
                    elif answer is None:
                        await self._store.update_served_task(row.id, "failed", STOPPED)
                    else:
                        await self._finish(row, running, answer)
                except Exception:
                    logger.exception("could not record the end of task %s", row.id)
                finally:
                    self._running.pop(row.id, None)
                    running.done.set()
                    self._ended.set()
                    self._ended = anyio.Event()

    async def _expire(self, running: _Running, at: float) -> None:
        """At the end of the task's TTL its work ends (its card withdrawn, saying why): nobody may ask for it any
        more."""
        await anyio.sleep(max(0.0, at - time.time()))
        running.expired = True
        self._stop(running, TTL_PASSED)

    async def _finish(self, row: ServedTask, running: _Running, answer: Answer) -> None:
        if isinstance(answer, ErrorData):
            await self._store.update_served_task(
                row.id, "failed", shorten(answer.message, 500),
                error=json.dumps(answer.model_dump(mode="json", by_alias=True, exclude_none=True)))
            return
        await self._store.update_served_task(row.id, "completed", _completed(row, answer, running.outcome),
                                            result=json.dumps(answer))

    async def card_asked(self, running: _Running, interaction: Interaction) -> None:
        running.interaction = interaction.id
        await self._store.update_served_task(running.task_id, "input_required", _waiting(interaction),
                                            interaction_id=interaction.id)

    async def card_ended(self, running: _Running, outcome: Outcome) -> None:
        running.interaction, running.outcome = None, outcome
        if not running.cancelled:
            await self._store.update_served_task(running.task_id, "working", "answered; finishing the request")


class _ServerTasks:
    """One server's view: the session hook of its sessions (`bridge.servers.task_client.TaskHost`)."""

    def __init__(self, tasks: ServedTasks, server: str) -> None:
        self._tasks = tasks
        self._server = server

    async def create(self, context: ClientRequestContext, method: str, task: TaskMetadata,
                     run: Callable[[], Awaitable[Answer]]) -> CreateTaskResult | ErrorData:
        return await self._tasks.create(self._server, context, method, task, run)

    async def get(self, task_id: str) -> Answer:
        return await self._tasks.get(self._server, task_id)

    async def result(self, task_id: str) -> Answer:
        return await self._tasks.result(self._server, task_id)

    async def cancel(self, task_id: str) -> Answer:
        return await self._tasks.cancel(self._server, task_id)


class _TaskAsker:
    def __init__(self, tasks: ServedTasks, inner: Asker) -> None:
        self._tasks = tasks
        self._inner = inner

    async def ask(self, interaction: Interaction, *, pending_call: str | None = None,
                  input_key: str | None = None, park: bool = False) -> Outcome:
        running = RUNNING.get()
        if running is not None and running.cancelled:
            return Outcome(Status.CANCELLED, reason=CANCELLED_BY_SERVER)
        if running is None:
            return await self._inner.ask(interaction, pending_call=pending_call, input_key=input_key, park=park)
        interaction = replace(interaction, details=(*interaction.details, Detail("Asked as a task", TASK_NOTE)))
        await self._tasks.card_asked(running, interaction)
        try:
            outcome = await self._inner.ask(interaction, pending_call=pending_call, input_key=input_key, park=park)
        except BaseException:
            running.interaction = None
            raise
        await self._tasks.card_ended(running, outcome)
        return outcome
