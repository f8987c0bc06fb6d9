"""Tool calls: the one owner of every call the bridge runs, whatever the era.

A call has one id (`ToolCall.id`): in the registry here (stop, `cancel`), on its session (`Session.calls`, which
tells legacy server requests whose call they belong to), on its status line and, for a 2026 call, as the stored
`PendingCall` row. Before a call runs, `ToolApproval` may ask a person; progress edits one status line.

Legacy (2025-11-25) servers call our handlers while `tools/call` is open; the SDK routes them. 2026-07-28 servers
answer `input_required`: this module drives that loop itself instead of the SDK's driver because it must store the
pending call (server, tool, arguments, request state, input requests) *before* any card is posted, so that a
restart loses nothing (`bridge.resume`). Each input request is dispatched through the SDK's callback table
(`ClientSession.dispatch_input_request`), so the same handler objects answer both eras; the request's context
travels in `bridge.request_context.CURRENT`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp import MCPError
from mcp.client import ClientRequestContext
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import UrlElicitationRequiredError
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    ElicitResult,
    ErrorData,
    InputRequest,
    InputRequiredResult,
    InputResponse,
)

from bridge import observe
from bridge.audience import Audience
from bridge.broker import Broker
from bridge.elicitation import Elicitation
from bridge.errors import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    URL_ELICITATION_REQUIRED,
    AuthError,
    BridgeError,
    InputRefused,
    ServerGoneError,
    SessionError,
)
from bridge.limits import Limits
from bridge.model import Actor, ConversationKey, MessageRef, StatusView
from bridge.outbound import Outbound
from bridge.request_context import CURRENT, new_id
from bridge.results import KeptResults
from bridge.sessions import Session, SessionPool
from bridge.storage import AsyncStore, PendingCall
from bridge.text import session_error_text, shorten
from bridge.tool_approval import ToolApproval

logger = logging.getLogger(__name__)

MAX_ROUNDS = 10
STATUS_EDIT_INTERVAL = 1.0
"""Seconds between edits of a progress status line (platforms rate-limit edits)."""
Answers = Callable[[], Awaitable[dict[str, InputResponse]]]


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


class ToolCalls:
    def __init__(self, pool: SessionPool, broker: Broker, store: AsyncStore, audience: Audience, outbound: Outbound,
                 approval: ToolApproval, elicitation: Elicitation) -> None:
        self._pool = pool
        self._broker = broker
        self._store = store
        self._audience = audience
        self._out = outbound
        self._approval = approval
        self._elicitation = elicitation
        self._calls: dict[str, ToolCall] = {}
        self.results = KeptResults(Limits())
        """Long results kept for `show <id>` (the host sets one bounded by the config's limits)."""
        self.restart_hint = True
        """Whether a failed server is said to start again on next use (in chat; a one-shot `call` has no next use)."""

    # -- the registry --------------------------------------------------------------------------------------------

    def find(self, conversation: ConversationKey, call_id: str | None) -> ToolCall | None:
        calls = [c for c in self._calls.values() if c.conversation == conversation]
        if call_id is not None:
            calls = [c for c in calls if c.id == call_id]
        return calls[-1] if calls else None

    async def stop(self, call_id: str, actor: Actor) -> bool:
        """Stop a running call (a Stop button or `cancel`): the server gets the cancellation."""
        call = self._calls.get(call_id)
        if call is None:
            return False
        allowed = self._audience.approvers(call.server) | ({call.requester.key} if call.requester else set())
        if call.requester is not None and actor.key not in allowed:
            await self._out.port_for(call.conversation).notify(
                call.conversation, actor, f"Only {call.requester.label()} can stop this call.")
            return False
        call.stopped_by = actor
        call.scope.cancel()
        return True

    # -- running -------------------------------------------------------------------------------------------------

    async def run(self, conversation: ConversationKey, requester: Actor | None, server: str, tool: str,
                  arguments: Mapping[str, Any], *, retry_after_links: bool = False) -> CallToolResult | None:
        """Run a tool call and return its result; failures are reported in the conversation and return None.

        `retry_after_links`: after a -32042 URL-required answer, once the person has answered every link "done", run
        the call again on the same session (once), instead of asking them to run it again. A one-shot `call` uses it
        (the person is at the terminal and the command should finish); chat keeps the call in the person's hands.

        Raises ServerUnavailable (no such server, disabled, no room) for the command layer to word.
        """
        call = ToolCall(new_id(), conversation, requester, server, tool)
        self._calls[call.id] = call
        try:
            with call.scope, observe.tool_call(server, tool):
                session = await self._pool.get(conversation, server, requester)
                ctx = self._audience.context(server, session, conversation, requester, tool)
                denied = await self._approval.answer(ctx, CallToolRequestParams(name=tool, arguments=dict(arguments)))
                if denied is not None:
                    assert isinstance(denied, CallToolResult)
                    return denied
                try:
                    return await self._on_session(session, call, dict(arguments))
                except MCPError as exc:
                    if exc.code != URL_ELICITATION_REQUIRED or not retry_after_links:
                        raise
                    if not await self._url_required(call, exc, retrying=True):
                        return None
                # A second -32042 is told like any other (below): the person runs the call again.
                return await self._on_session(session, call, dict(arguments))
            await self._finish_status(call, f"stopped by {call.stopped_by.label() if call.stopped_by else 'request'}")
            await self._out.say(conversation, f"Stopped {server}.{tool}.")
            return None
        except MCPError as exc:
            if exc.code == URL_ELICITATION_REQUIRED:
                await self._url_required(call, exc)
                return None
            await self._out.say(conversation, f"{server}.{tool} failed with error {exc.code}: "
                                              f"{shorten(exc.error.message, 1000)}")
            return None
        except InputRefused as exc:
            await self._out.say(conversation, f"{server}.{tool} was not continued: {shorten(exc.error.message, 500)}")
            return None
        except AuthError as exc:  # no known person, or a sign-in that did not happen: never sent as anyone else
            await self._out.say(conversation, str(exc))
            return None
        except SessionError as exc:
            await self._out.say(conversation, session_error_text(exc, again=self.restart_hint))
            return None
        finally:
            self._calls.pop(call.id, None)
            if call.status is not None and not call.scope.cancel_called:
                await self._finish_status(call, "done")

    async def run_stored(self, pending: PendingCall, requests: Mapping[str, InputRequest],
                         answered: Answers) -> CallToolResult:
        """Finish a 2026 call stored before a restart, under its stored id: `answered` waits for the answers on the
        cards already posted; the rest are asked again, then the call is retried."""
        session = await self._pool.get(pending.conversation, pending.server, pending.requester)
        call = ToolCall(pending.id, pending.conversation, pending.requester, pending.server, pending.tool)
        session.calls[call.id] = call
        try:
            responses = await self._answer_all(session, pending, requests, await answered())
            return await self._modern(session, call, dict(pending.arguments), None, pending.request_state, responses)
        finally:
            session.calls.pop(call.id, None)

    async def report(self, conversation: ConversationKey, server: str, tool: str, result: CallToolResult) -> None:
        head = f"{server}.{tool} reported an error:" if result.is_error else f"{server}.{tool}:"
        await self._out.say(conversation, self.results.message(conversation, head, result))

    async def _on_session(self, session: Session, call: ToolCall, arguments: dict[str, Any]) -> CallToolResult:
        async def progress(progress: float, total: float | None, message: str | None) -> None:
            await self._show_progress(call, progress, total, message)

        if session.serial:
            # A legacy server's request does not say which open call it belongs to: one call at a time.
            async with session.call_lock:
                return await self._registered(session, call, arguments, progress)
        return await self._registered(session, call, arguments, progress)

    async def _registered(self, session: Session, call: ToolCall, arguments: dict[str, Any],
                          progress: ProgressFnT) -> CallToolResult:
        session.calls[call.id] = call
        try:
            if session.modern:
                return await self._modern(session, call, arguments, progress, None, None)
            assert session.client is not None
            result: CallToolResult = await self._guard(
                session, session.client.call_tool(call.tool, arguments, progress_callback=progress))
            return result
        finally:
            session.calls.pop(call.id, None)
            session.last_used = time.monotonic()

    async def _guard(self, session: Session, request: Awaitable[Any]) -> Any:
        """Await an MCP request, turning a dead connection into ServerGoneError and dropping the session."""
        try:
            return await request
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                raise self._gone(session, exc) from exc
            raise
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream) as exc:
            raise self._gone(session, exc) from exc

    def _gone(self, session: Session, exc: BaseException) -> ServerGoneError:
        tail = session.stderr_tail()
        self._pool.mark_gone(session, str(exc) or type(exc).__name__)
        return ServerGoneError(session.server.name, f"{session.server.name} stopped during the call", tail)

    # -- the 2026 input-required driver --------------------------------------------------------------------------

    async def _modern(self, session: Session, call: ToolCall, arguments: dict[str, Any],
                      progress: ProgressFnT | None, request_state: str | None,
                      responses: dict[str, InputResponse] | None) -> CallToolResult:
        try:
            return await self._rounds(session, call, arguments, progress, request_state, responses)
        except BaseException:
            # Stopped, refused, failed or crashed: the call is over, so it must not come back after a restart. Only
            # a shutdown keeps it, to be answered then.
            if not self._broker.closing:
                with anyio.CancelScope(shield=True):
                    await self._store.delete_pending_call(call.id)
            raise

    async def _rounds(self, session: Session, call: ToolCall, arguments: dict[str, Any],
                      progress: ProgressFnT | None, request_state: str | None,
                      responses: dict[str, InputResponse] | None) -> CallToolResult:
        assert session.client is not None
        client_session = session.client.session
        for _ in range(MAX_ROUNDS):
            result = await self._guard(session, client_session.call_tool(
                call.tool, arguments, progress_callback=progress, input_responses=responses,
                request_state=request_state, allow_input_required=True))
            if not isinstance(result, InputRequiredResult):
                await self._store.delete_pending_call(call.id)
                assert isinstance(result, CallToolResult)
                return result
            request_state = result.request_state
            requests = dict(result.input_requests or {})
            if not requests:
                # A state-only round: the server wants the same call again with its state (SEP-2322 backoff).
                await anyio.sleep(0.1)
                responses = None
                continue
            pending = PendingCall(
                id=call.id, conversation=call.conversation, server=call.server, tool=call.tool, arguments=arguments,
                request_state=request_state,
                input_requests={k: r.model_dump(mode="json", by_alias=True, exclude_none=True)
                                for k, r in requests.items()},
                requester=call.requester)
            # Stored before any card is posted: a crash from here on can be resumed.
            await self._store.save_pending_call(pending)
            responses = await self._answer_all(session, pending, requests, {})
        await self._store.delete_pending_call(call.id)
        raise MCPError(code=INTERNAL_ERROR, message=f"{call.tool} still needed input after {MAX_ROUNDS} rounds; "
                                                    "giving up")

    async def _answer_all(self, session: Session, pending: PendingCall, requests: Mapping[str, InputRequest],
                          known: Mapping[str, InputResponse]) -> dict[str, InputResponse]:
        """Answer every input request concurrently. The first refusal cancels the others and ends the call."""
        assert session.client is not None
        client_session = session.client.session
        responses: dict[str, InputResponse] = dict(known)
        refusal: list[ErrorData] = []

        async def one(key: str, request: InputRequest) -> None:
            CURRENT.set(self._audience.context(pending.server, session, pending.conversation, pending.requester,
                                               pending.tool, pending_call=pending.id, input_key=key))
            meta = request.params.meta if request.params else None
            answer = await client_session.dispatch_input_request(
                ClientRequestContext(session=client_session, request_id=key, meta=meta), request)
            if isinstance(answer, ErrorData):
                refusal.append(answer)
                tg.cancel_scope.cancel()
            else:
                responses[key] = answer

        async with anyio.create_task_group() as tg:
            for key, request in requests.items():
                if key not in responses:
                    tg.start_soon(one, key, request)  # each task runs in its own copy of the context
        if refusal:
            await self._store.delete_pending_call(pending.id)
            raise InputRefused(refusal[0])
        return responses

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
            answer = await self._elicitation.answer(ctx, params)
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
        view = self._status_view(call, text or "", value, total)
        port = self._out.port_for(call.conversation)
        try:
            if call.status is None:
                call.status = await port.post_status(call.conversation, view)
            else:
                await port.update_status(call.status, view)
        except BridgeError as exc:
            logger.warning("could not show progress: %s", exc)

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
