"""Tool calls: the one owner of every call the bridge runs, whatever the era.

A call has one id (`ToolCall.id`): in the registry here (stop, `cancel`), on its session (`Session.calls`, which
tells legacy server requests whose call they belong to), on its status line, in the store's record of running calls
(so that a crash is told to its conversation at the next start) and, for a 2026 call, as the stored `PendingCall`
row. Before a call runs, `ToolApproval` may ask a person; progress edits one status line.

Legacy (2025-11-25) servers call our handlers while `tools/call` is open; the SDK routes them, and the call keeps its
session. 2026-07-28 calls are driven by `bridge.calls.rounds`: a call whose result is reported in its conversation (the
`call` command) is parked while people answer its cards, and continued here (`continue_call`) when they have.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import TaskGroup
from mcp import MCPError
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import UrlElicitationRequiredError
from mcp.types import CallToolRequestParams, CallToolResult, ElicitResult, InputRequest, TextContent

from bridge.calls import task_wire
from bridge.calls.kept_results import KeptResults
from bridge.calls.rounds import ParkedCall, Rounds, guarded
from bridge.calls.store_roles import CallStore
from bridge.calls.tasks import TaskCalls, TaskTold
from bridge.cards.broker import Broker
from bridge.cards.chat import Outbound
from bridge.config.file import ServerConfig
from bridge.door.model import Actor, ConversationKey, MessageRef, StatusView
from bridge.door.ports import CLEANUP_TIMEOUT
from bridge.errors import URL_ELICITATION_REQUIRED, AuthError, BridgeError, InputRefused, SessionError
from bridge.observe import hooks as observe
from bridge.requests.context_lookup import Audience
from bridge.requests.elicitation import Elicitation
from bridge.requests.receipting import Receipting
from bridge.requests.request_context import new_id
from bridge.requests.tool_approval import ToolApproval
from bridge.safety.limits import Limits
from bridge.servers.mcp_session import Session
from bridge.servers.sessions import SessionPool
from bridge.storage import StoredTask
from bridge.text.plain import result_text, session_error_text, shorten
from bridge.text.server_errors import validation_summary
from bridge.web.apps import meta as app_meta
from bridge.web.apps.views import AppViews

logger = logging.getLogger(__name__)

STATUS_EDIT_INTERVAL = 1.0
"""Seconds between edits of a progress status line (platforms rate-limit edits)."""
ROOM_WAIT = 30.0
"""How long a new call waits for a session when every one is busy, before it is refused."""


@dataclass(eq=False)
class ToolCall:
    id: str
    conversation: ConversationKey
    requester: Actor | None
    server: str
    tool: str
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    status: MessageRef | None = None
    last_edit: float = 0.0
    stopped_by: Actor | None = None
    parked: bool = False
    keep_pending: bool = False
    """A continued 2026 call: its stored row goes once the result is reported (`continue_call`), not before."""
    task: str = ""
    """Never a task id here: a call running as a task is registered on its session as its `TaskRun`."""
    status_final: bool = False
    """Its status card shows how it ended already (a task's card, brought to its end by the task driver)."""


class _Told(Exception):
    """The call ended and its conversation has been told why already (links it needed were not all visited)."""


class ToolCalls:
    def __init__(self, pool: SessionPool, broker: Broker, store: CallStore, audience: Audience, outbound: Outbound,
                 approval: ToolApproval, elicitation: Elicitation, results: KeptResults | None = None, *,
                 receipts: Receipting | None = None, apps: AppViews | None = None,
                 restart_hint: bool = True, limits: Limits | None = None,
                 servers: Mapping[str, ServerConfig] | None = None) -> None:
        """`results`: long results kept for `show <id>` (bounded by the config's limits). `receipts`: signed
        receipts of what people approve. `apps`: MCP Apps offered with results. `restart_hint`: whether a failed
        server is said to start again on next use (in chat; a one-shot `call` has no next use). `limits`,
        `servers`: the bounds and settings of tool calls run as MCP tasks (`bridge.calls.tasks`)."""
        self._pool = pool
        self._broker = broker
        self._store = store
        self._audience = audience
        self._out = outbound
        self._approval = approval
        self._elicitation = elicitation
        self._apps = apps
        self._calls: dict[str, ToolCall] = {}
        self.results = results or KeptResults(Limits())
        self._restart_hint = restart_hint
        self.rounds = Rounds(pool, broker, store, audience, receipts)
        self.tasks = TaskCalls(pool, outbound, limits or Limits(), store, servers or {}, broker)

    # -- the registry --------------------------------------------------------------------------------------------

    def find(self, conversation: ConversationKey, call_id: str | None) -> ToolCall | ParkedCall | None:
        calls: list[ToolCall | ParkedCall] = [c for c in self._calls.values() if c.conversation == conversation]
        calls += [c for c in self.rounds.parked.values() if c.conversation == conversation and c.id not in self._calls]
        if call_id is not None:
            calls = [c for c in calls if c.id == call_id]
        return calls[-1] if calls else None

    def live(self, call_id: str) -> bool:
        """Whether this process runs (or holds parked) the call `call_id`."""
        return call_id in self._calls or call_id in self.rounds.parked

    async def stop(self, call_id: str, actor: Actor) -> bool:
        """Stop a call (a Stop button or `cancel`): a running one is cancelled at the server; a parked one's cards
        end and it is forgotten."""
        call: ToolCall | ParkedCall | None = self._calls.get(call_id) or self.rounds.parked.get(call_id)
        if call is None:
            return False
        allowed = self._audience.approvers(call.server) | ({call.requester.key} if call.requester else set())
        if call.requester is not None and actor.key not in allowed:
            await self._out.port_for(call.conversation).notify(
                call.conversation, actor, f"Only {call.requester.label()} can stop this call.")
            return False
        if isinstance(call, ToolCall):
            if call_id in self.tasks.running:  # the server is asked to cancel it, and says how it ended
                return await self.tasks.stop(call_id, actor)
            call.stopped_by = actor
            call.scope.cancel()
            return True
        await self.rounds.stop(call_id, f"the call was stopped by {actor.label()}")
        await self._store.end_running_call(call_id)
        await self._out.say(call.conversation, f"Stopped {call.server}.{call.tool}.")
        return True

    # -- running -------------------------------------------------------------------------------------------------

    async def run(self, conversation: ConversationKey, requester: Actor | None, server: str, tool: str,
                  arguments: Mapping[str, Any], *, park: bool = False,
                  retry_after_links: bool = False, from_app: bool = False) -> CallToolResult | None:
        """Run a tool call and return its result; failures are reported in the conversation and return None.

        With `park`, a 2026 call that must wait for people is parked and None is returned: its result is reported
        in the conversation when it comes (`report`). `retry_after_links`: after a -32042 URL-required answer, once
        the person has answered every link "done", run the call again (once), instead of asking them to run it
        again. A one-shot `call` uses it (the person is at the terminal and the command should finish); chat keeps
        the call in the person's hands. `from_app`: an MCP App asks (`bridge.web.apps`), so a tool meant for the app
        alone may run; any other caller is refused one. Raises ServerUnavailable (no such server, disabled, no room)
        for the command layer to word.
        """
        call = ToolCall(new_id(), conversation, requester, server, tool)
        await self._store.record_running_call(call.id, conversation, server, tool)
        return await self._supervised(call, self._start(call, dict(arguments), park, retry_after_links, from_app))

    async def continue_call(self, record: ParkedCall, missing: Mapping[str, InputRequest]) -> None:
        """Continue a parked or restored 2026 call under its id, and report its result in its conversation."""
        call = ToolCall(record.id, record.conversation, record.requester, record.server, record.tool,
                        status=record.status, keep_pending=True)
        name = f"{record.server}.{record.tool}"
        try:
            result = await self._supervised(call, self.rounds.resume(call, record, missing, self._progress(call)))
        except BridgeError as exc:  # ServerUnavailable: the server was removed or disabled meanwhile
            await self._out.say(record.conversation, f"{name} could not be continued: {shorten(str(exc), 500)}")
            return
        except Exception as exc:
            # The top of a task that continues a call after a decision: one failing call must not stop the bridge.
            logger.exception("continuing %s failed", name)
            await self._out.say(record.conversation, f"{name} could not be continued: an internal error "
                                                     f"({type(exc).__name__}); it was logged.")
            return
        if result is not None:
            # The stored call goes only once its result is out: a worker that dies between the server's answer and
            # the report leaves it stored with its round marked sent, and whoever takes it over tells the
            # conversation (or sends it again, for a server that allows it) instead of the result vanishing
            # unsaid. Shielded together, so a stop in between neither loses nor repeats it. One scope bounds the
            # report and, its deadline lifted once the report is out, shields the delete too (a scope for each was
            # two timers' and scopes' worth of calls on every continued call); a report cut short by the deadline
            # left its scope cancelled, so the delete is done in a scope of its own (deleting twice changes nothing).
            with anyio.CancelScope(shield=True, deadline=anyio.current_time() + CLEANUP_TIMEOUT) as bounded:
                await self.report(record.conversation, record.server, record.tool, result,
                                  requester=record.requester, arguments=record.arguments)
                bounded.deadline = math.inf
                await self._store.delete_pending_call(record.id)
            if bounded.cancel_called:
                with anyio.CancelScope(shield=True):
                    await self._store.delete_pending_call(record.id)

    async def report(self, conversation: ConversationKey, server: str, tool: str, result: CallToolResult, *,
                     requester: Actor | None = None, arguments: Mapping[str, Any] | None = None) -> None:
        summary = validation_summary(result_text(result)) if result.is_error else None
        if summary is not None:
            await self._out.say(conversation, f"{server}.{tool} refused its arguments: {summary}. See `tools {server} "
                                              f"{tool}`.")
            return
        head = f"{server}.{tool} reported an error:" if result.is_error else f"{server}.{tool}:"
        await self._out.say(conversation, self.results.message(conversation, head, result))
        await self.offer_app(conversation, requester, server, tool, arguments or {}, result)

    async def offer_app(self, conversation: ConversationKey, requester: Actor | None, server: str, tool: str,
                        arguments: Mapping[str, Any], result: CallToolResult) -> None:
        """Offer the app of a successful result in its conversation, when the tool has one (MCP Apps)."""
        if self._apps is None or result.is_error or not self._apps.enabled(server):
            return
        try:
            # The tools the call's session listed (a pooled 2026 session may not have listed them yet).
            listed = {t.name: t for t in await self._pool.list_tools(conversation, server, person=requester)}
        except BridgeError as exc:
            logger.warning("no app offered for %s.%s: %s", server, tool, exc)
            return
        if tool in listed:
            session = self._pool.find(conversation, server, requester)
            await self._apps.offer(conversation, requester, self._audience.label(server, session), listed[tool],
                                   arguments, result, session)

    async def _supervised(self, call: ToolCall, body: Awaitable[CallToolResult | None]) -> CallToolResult | None:
        """Await `body` as `call`: registered (stoppable), its failures worded in its conversation. None when it
        failed, was stopped or was parked. Nothing before the await can fail, so `body` is always awaited."""
        self._calls[call.id] = call
        keep_record = False
        cut_short: str | None = None  # why the call ended without a result, when nothing else said so
        try:
            with call.scope, observe.tool_call(call.server, call.tool):
                result = await body
                keep_record = call.parked = result is None
                if not (call.parked and call.scope.cancel_called):
                    return result
            stopped_by = call.stopped_by.label() if call.stopped_by else "request"
            if call.parked:
                # The stop came after the call's last checkpoint, as it was parked: nothing was cancelled, so end it
                # as a parked call is stopped (its cards withdrawn, its stored row gone).
                keep_record = False
                await self.rounds.stop(call.id, f"the call was stopped by {stopped_by}")
            await self._finish_status(call, f"stopped by {stopped_by}")
            await self._out.say(call.conversation, f"Stopped {call.server}.{call.tool}.")
            return None
        except MCPError as exc:
            if exc.code == URL_ELICITATION_REQUIRED:
                await self._url_required(call, exc)
                return None
            await self._out.say(call.conversation, f"{call.server}.{call.tool} failed with error {exc.code}: "
                                                   f"{shorten(exc.error.message, 1000)}")
            return None
        except InputRefused as exc:
            await self._out.say(call.conversation, f"{call.server}.{call.tool} was not continued: "
                                                   f"{shorten(exc.error.message, 500)}")
            return None
        except AuthError as exc:  # no known person, or a sign-in that did not happen: never sent as anyone else
            await self._out.say(call.conversation, str(exc))
            return None
        except (_Told, TaskTold):
            return None
        except SessionError as exc:
            await self._out.say(call.conversation, session_error_text(exc, again=self._restart_hint))
            return None
        except BaseException as exc:
            # Cut short by a shutdown: the record stays, and the next start tells the conversation.
            keep_record = self._broker.closing
            cut_short = "interrupted" if isinstance(exc, anyio.get_cancelled_exc_class() | KeyboardInterrupt) \
                else "failed"
            raise
        finally:
            self._calls.pop(call.id, None)
            if not keep_record:
                with anyio.CancelScope(shield=True):
                    await self._store.end_running_call(call.id)
            if call.status is not None and not call.scope.cancel_called and not call.status_final:
                await self._finish_status(call, cut_short or (
                    "waiting for answers on its cards" if call.parked else "done"))

    async def _start(self, call: ToolCall, arguments: dict[str, Any], park: bool,
                     retry_after_links: bool, from_app: bool = False) -> CallToolResult | None:
        session = await self._pool.get(call.conversation, call.server, call.requester, wait=ROOM_WAIT)
        # A tool meant for its app only is refused in chat. Where the server is offered apps that may need its tool
        # list; elsewhere only a list already fetched is read, so a call whose rules decide alone lists nothing.
        if not from_app and (session.tools is not None or (self._apps is not None and self._apps.enabled(call.server))):
            if session.tools is not None and call.tool in session.tools:
                known = session.tools[call.tool]  # listed already (`pool.tool` would await nothing): no hold needed
            else:
                with self._pool.hold(session):
                    known = await self._pool.tool(session, call.tool)
            if known is not None and not app_meta.for_model(known):
                return CallToolResult(content=[TextContent(type="text", text=(
                    f"{call.tool} is used by {call.server}'s app only. Open the app from a result of its tool."))],
                    is_error=True)
        needs_approval = self._approval.known(session, call.conversation, call.tool)
        if needs_approval is None:
            with self._pool.hold(session):
                needs_approval = await self._approval.required(session, call.conversation, call.tool)
        meta: dict[str, Any] | None = None
        approval: str | None = None
        if needs_approval:
            ctx = self._audience.context(call.server, session, call.conversation, call.requester, call.tool)
            decided = await self._approval.decide(ctx, CallToolRequestParams(name=call.tool, arguments=arguments))
            if isinstance(decided, CallToolResult):
                return decided
            meta, approval = decided.meta, decided.approval  # the receipt travels with the call it approves
            # The card may have taken minutes, with the session idle: it may have been closed for room meanwhile.
            session = await self._pool.get(call.conversation, call.server, call.requester, wait=ROOM_WAIT)
        try:
            return await self._on_session(session, call, arguments, park, meta, approval)
        except MCPError as exc:
            if exc.code != URL_ELICITATION_REQUIRED or not retry_after_links:
                raise
            if not await self._url_required(call, exc, retrying=True):
                raise _Told from exc
        # Once more, without asking for approval again; a second -32042 is told like any other: run it again.
        session = await self._pool.get(call.conversation, call.server, call.requester, wait=ROOM_WAIT)
        return await self._on_session(session, call, arguments, park, meta, approval)

    async def _on_session(self, session: Session, call: ToolCall, arguments: dict[str, Any], park: bool,
                          meta: dict[str, Any] | None = None, approval: str | None = None) -> CallToolResult | None:
        if session.modern:
            # Registered on the session before anything is awaited, so it is not closed for room meanwhile.
            return await self.rounds.drive(call, arguments, self._progress(call), park=park, session=session,
                                           meta=meta, approval=approval)
        if await self._as_task(session, call):
            return await self._task(session, call, arguments, meta)
        # A legacy server's request does not say which open call it belongs to: one call at a time. Written out here
        # rather than in a function of its own: every frame the waiting call is in is entered again each time it
        # wakes. Leaving the hold tells the pool the session is released.
        with self._pool.hold(session):
            # A free lock is taken without `acquire`'s check for cancellation (a walk up every scope of the call): the
            # request's own send checks before anything leaves.
            lock = session.call_lock
            try:
                lock.acquire_nowait()
            except anyio.WouldBlock:
                await lock.acquire()
            try:
                session.calls[call.id] = call
                assert session.client is not None
                result: CallToolResult = await guarded(self._pool, session, session.client.call_tool(
                    call.tool, arguments, progress_callback=self._progress(call), meta=meta))  # type: ignore[arg-type]
                return result
            finally:
                session.calls.pop(call.id, None)
                lock.release()

    async def _as_task(self, session: Session, call: ToolCall) -> bool:
        """Whether this call runs as a task: the tool requires it, or allows it on a server set to `tasks: prefer`;
        and the server takes tool calls as tasks."""
        if session.client is None or not task_wire.server_runs_tool_tasks(session.client.server_capabilities):
            return False
        with self._pool.hold(session):
            support = task_wire.task_support(await self._pool.tool(session, call.tool))
        return support == "required" or (support == "optional" and session.server.tasks == "prefer")

    async def _task(self, session: Session, call: ToolCall, arguments: dict[str, Any],
                    meta: dict[str, Any] | None) -> CallToolResult:
        refused = self.tasks.refusal(call.conversation, call.server)
        if refused is not None:
            await self._out.say(call.conversation, f"{call.server}.{call.tool} was not started: {refused}.")
            raise _Told
        with self._pool.hold(session):
            return await self.tasks.run(session, call, arguments, meta, lambda text, done: self._show_task(
                call, text, done))

    async def resume_tasks(self, tg: TaskGroup) -> None:
        """Pick up the tasks an earlier run left (their rows nobody alive holds), each followed in `tg`."""
        for row in await self._store.claim_tasks():
            tg.start_soon(self._resume_task, row)

    async def _resume_task(self, row: StoredTask) -> None:
        call = ToolCall(row.call_id, row.conversation, row.requester, row.server, row.tool, status=row.card)
        name = f"{row.server}.{row.tool}"
        self._calls[call.id] = call
        try:
            with call.scope:
                result = await self.tasks.resume(row, lambda text, done: self._show_task(call, text, done))
                await self.report(row.conversation, row.server, row.tool, result)
        except TaskTold:
            pass
        except (MCPError, BridgeError) as exc:
            await self._out.say(row.conversation, f"{name}: the task could not be followed after the restart: "
                                                  f"{shorten(str(exc), 300)}")
        except Exception as exc:
            # The top of a task picked up at start: one task that cannot be followed must not stop the bridge.
            logger.exception("following task %s again failed", row.task_id)
            await self._out.say(row.conversation, f"{name}: the task could not be followed after the restart: an "
                                                  f"internal error ({type(exc).__name__}); it was logged.")
        finally:
            self._calls.pop(call.id, None)

    async def _show_task(self, call: ToolCall, text: str, done: bool) -> MessageRef | None:
        """A task's status card: posted once, then one edit per change the driver reports."""
        if await self._put_status(call, self._status_view(call, text, done=done), "a task's status"):
            call.status_final = done
        return call.status

    def _progress(self, call: ToolCall) -> ProgressFnT:
        async def progress(progress: float, total: float | None, message: str | None) -> None:
            await self._show_progress(call, progress, total, message)
        return progress

    # -- what the conversation sees ------------------------------------------------------------------------------

    async def _url_required(self, call: ToolCall, exc: MCPError, *, retrying: bool = False) -> bool:
        """A legacy -32042 error: show each URL it names. True when every link was answered "done" (the caller may
        retry); otherwise, or when `retrying` is false, the person runs the call again after visiting them."""
        name = f"{call.server}.{call.tool}"
        try:
            elicitations = UrlElicitationRequiredError.from_error(exc.error).elicitations
        except (ValueError, TypeError, KeyError):
            elicitations = []
        if not elicitations:
            await self._out.say(call.conversation, f"{name} needs a link visited first, but sent no usable link.")
            return False
        session = self._pool.find(call.conversation, call.server, call.requester)
        ctx = self._audience.context(call.server, session, call.conversation, call.requester, call.tool)
        then = ("It runs again once you say they are done." if retrying
                else "Run the call again when you are done.")
        await self._out.say(call.conversation, f"{name} needs {len(elicitations)} link(s) visited before it can run. "
                                               + then)
        done: list[bool] = []

        async def one(params: Any) -> None:
            answer = await self._elicitation.answer_unsent(ctx, params)  # the server never sees it
            done.append(isinstance(answer, ElicitResult) and answer.action == "accept")

        async with anyio.create_task_group() as tg:
            for params in elicitations:
                tg.start_soon(one, params)
        return len(done) == len(elicitations) and all(done)

    async def _show_progress(self, call: ToolCall, value: float, total: float | None, text: str | None) -> None:
        now = time.monotonic()
        final = total is not None and value >= total
        if call.status is not None and now - call.last_edit < STATUS_EDIT_INTERVAL and not final:
            return
        call.last_edit = now
        await self._put_status(call, self._status_view(call, text or "", value, total), "progress")

    async def _put_status(self, call: ToolCall, view: StatusView, what: str) -> bool:
        """Post the call's status card, or edit it once posted; False (logged) when the chat refused."""
        port = self._out.port_for(call.conversation)
        try:
            if call.status is None:
                # Its record (written behind) is durable before the call is shown running: after a crash from
                # here on, the next start tells the conversation it was interrupted.
                await self._store.flush()
                call.status = await port.post_status(call.conversation, view)
            else:
                await port.update_status(call.status, view)
        except BridgeError as exc:
            logger.warning("could not show %s: %s", what, exc)
            return False
        return True

    def _status_view(self, call: ToolCall, text: str, value: float | None = None, total: float | None = None,
                     done: bool = False) -> StatusView:
        label = self._audience.label(call.server, self._pool.find(call.conversation, call.server, call.requester))
        return StatusView(call.id, label, call.tool, shorten(text, 300), value, total, done, stoppable=not done)

    async def _finish_status(self, call: ToolCall, text: str) -> None:
        if call.status is None:
            return
        with anyio.move_on_after(5, shield=True):
            try:
                await self._out.port_for(call.conversation).update_status(call.status,
                                                                          self._status_view(call, text, done=True))
            except BridgeError as exc:
                logger.warning("could not finish a status line: %s", exc)
