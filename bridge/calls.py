"""Tool calls across both MCP eras.

Legacy (2025-11-25) servers call our callbacks while `tools/call` is open; the SDK routes them and we only wait.
2026-07-28 servers answer `input_required`: this module drives that loop itself instead of letting the SDK do it,
because it must store the pending call (server, tool, arguments, request state, input requests) *before* any card
is posted, so that a restart of the bridge loses nothing: `resume` picks the stored call up, waits for the answers
on the cards already posted, and retries.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
from mcp import MCPError
from mcp.shared.dispatcher import ProgressFnT
from mcp.types import (
    CONNECTION_CLOSED,
    CallToolResult,
    ElicitRequest,
    ErrorData,
    InputRequest,
    InputRequiredResult,
    InputResponse,
)
from pydantic import TypeAdapter

from bridge.broker import Broker
from bridge.context import RequestContext, new_id
from bridge.elicitation import to_result
from bridge.errors import ServerGoneError
from bridge.model import Actor, ConversationKey, Kind, Status
from bridge.sessions import CallInfo, Session, SessionPool
from bridge.store import PendingCall, Store, StoredInteraction

logger = logging.getLogger(__name__)

MAX_ROUNDS = 10
_INPUT_REQUEST: TypeAdapter[InputRequest] = TypeAdapter(InputRequest)

AnswerFn = Callable[[RequestContext, InputRequest], Awaitable[InputResponse | ErrorData]]
ProgressFn = ProgressFnT
ContextFn = Callable[[Session, ConversationKey, Actor | None, str], RequestContext]


class InputRefused(Exception):
    """A 2026 input request was refused (a denial, an unsupported form): the call is not retried."""

    def __init__(self, error: ErrorData) -> None:
        self.error = error
        super().__init__(error.message)


class Caller:
    def __init__(self, pool: SessionPool, broker: Broker, store: Store, answer: AnswerFn,
                 context: ContextFn) -> None:
        self._pool = pool
        self._broker = broker
        self._store = store
        self._answer = answer
        self._context = context

    async def call(self, conversation: ConversationKey, requester: Actor | None, server: str, tool: str,
                   arguments: Mapping[str, Any], progress: ProgressFn | None = None) -> CallToolResult:
        """Run one tool call to its end, whatever the era, and return the server's result.

        Raises:
            ServerStartError / CommandError: from the pool.
            ServerGoneError: the server died during the call.
            InputRefused: a 2026 input request was refused, so the call was not retried.
            MCPError: the server answered with a protocol error.
        """
        session = await self._pool.get(conversation, server)
        if session.serial:
            async with session.call_lock:
                return await self._call(session, conversation, requester, tool, arguments, progress)
        return await self._call(session, conversation, requester, tool, arguments, progress)

    async def _call(self, session: Session, conversation: ConversationKey, requester: Actor | None, tool: str,
                    arguments: Mapping[str, Any], progress: ProgressFn | None) -> CallToolResult:
        call_id = new_id()
        session.calls[call_id] = CallInfo(conversation, requester, tool)
        try:
            if session.modern:
                return await self._call_modern(session, call_id, conversation, requester, tool, dict(arguments),
                                               progress)
            assert session.client is not None
            result: CallToolResult = await self._guard(
                session, session.client.call_tool(tool, dict(arguments), progress_callback=progress))
            return result
        finally:
            session.calls.pop(call_id, None)
            session.last_used = time.monotonic()

    async def _guard(self, session: Session, call: Awaitable[Any]) -> Any:
        """Await an MCP request, turning a dead connection into ServerGoneError and dropping the session."""
        try:
            return await call
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

    async def _call_modern(self, session: Session, call_id: str, conversation: ConversationKey,
                           requester: Actor | None, tool: str, arguments: dict[str, Any],
                           progress: ProgressFn | None, *, request_state: str | None = None,
                           responses: dict[str, InputResponse] | None = None) -> CallToolResult:
        try:
            return await self._rounds(session, call_id, conversation, requester, tool, arguments, progress,
                                      request_state, responses)
        except BaseException:
            # Stopped, refused, failed or crashed: the call is over, so it must not come back after a restart. Only
            # a shutdown keeps it, to be answered then.
            if not self._broker.closing:
                self._store.delete_pending_call(call_id)
            raise

    async def _rounds(self, session: Session, call_id: str, conversation: ConversationKey, requester: Actor | None,
                      tool: str, arguments: dict[str, Any], progress: ProgressFn | None, request_state: str | None,
                      responses: dict[str, InputResponse] | None) -> CallToolResult:
        assert session.client is not None
        client_session = session.client.session
        for _ in range(MAX_ROUNDS):
            result = await self._guard(session, client_session.call_tool(
                tool, arguments, progress_callback=progress, input_responses=responses,
                request_state=request_state, allow_input_required=True))
            if not isinstance(result, InputRequiredResult):
                self._store.delete_pending_call(call_id)
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
                id=call_id, conversation=conversation, server=session.server.name, tool=tool, arguments=arguments,
                request_state=request_state,
                input_requests={k: r.model_dump(mode="json", by_alias=True, exclude_none=True)
                                for k, r in requests.items()},
                requester=requester)
            # Stored before any card is posted: a crash from here on can be resumed.
            self._store.save_pending_call(pending)
            responses = await self._answer_all(session, pending, requests, {})
        self._store.delete_pending_call(call_id)
        raise MCPError(code=-32603, message=f"{tool} still needed input after {MAX_ROUNDS} rounds; giving up")

    async def _answer_all(self, session: Session, pending: PendingCall, requests: Mapping[str, InputRequest],
                          known: Mapping[str, InputResponse]) -> dict[str, InputResponse]:
        """Answer every input request concurrently. The first refusal cancels the others and ends the call."""
        responses: dict[str, InputResponse] = dict(known)
        refusal: list[ErrorData] = []

        async def one(key: str, request: InputRequest) -> None:
            base = self._context(session, pending.conversation, pending.requester, pending.tool)
            ctx = RequestContext(base.conversation, base.server, base.requester, base.approvers, base.tool,
                                 pending_call=pending.id, input_key=key)
            answer = await self._answer(ctx, request)
            if isinstance(answer, ErrorData):
                refusal.append(answer)
                tg.cancel_scope.cancel()
            else:
                responses[key] = answer

        async with anyio.create_task_group() as tg:
            for key, request in requests.items():
                if key not in responses:
                    tg.start_soon(one, key, request)
        if refusal:
            self._store.delete_pending_call(pending.id)
            raise InputRefused(refusal[0])
        return responses

    async def resume(self, pending: PendingCall, progress: ProgressFn | None = None) -> CallToolResult:
        """Finish a 2026 call stored before a restart: wait on its open cards, then retry with the answers."""
        requests = {k: _INPUT_REQUEST.validate_python(v) for k, v in pending.input_requests.items()}
        known: dict[str, InputResponse] = {}
        waits: dict[str, StoredInteraction] = {}
        latest: dict[str, StoredInteraction] = {}
        # Only this round's cards: a server may reuse a key, and an earlier round's answer is not this one's.
        for stored in self._store.interactions_for_call(pending.id, since=pending.created_at):
            key = stored.input_key
            if key is not None and key in requests and isinstance(requests[key], ElicitRequest) \
                    and stored.interaction.kind in (Kind.FORM, Kind.URL):
                latest[key] = stored
        for key, stored in latest.items():
            if stored.status is Status.OPEN:
                waits[key] = stored
            elif stored.outcome is not None:
                known[key] = to_result(stored.outcome)
        # Anything else still open for this call (a sampling or roots step) is asked again from the start.
        resumed = {s.interaction.id for s in waits.values()}
        for stored in self._store.interactions_for_call(pending.id):
            if stored.status is Status.OPEN and stored.interaction.id not in resumed:
                await self._broker.retire(stored, "asked again after the bridge restarted")
        session = await self._pool.get(pending.conversation, pending.server)
        session.calls[pending.id] = CallInfo(pending.conversation, pending.requester, pending.tool)
        try:
            async def wait_one(key: str, stored: StoredInteraction) -> None:
                outcome = await self._broker.resume(stored.interaction, stored.card)
                known[key] = to_result(outcome)

            async with anyio.create_task_group() as tg:
                for key, stored in waits.items():
                    tg.start_soon(wait_one, key, stored)
            responses = await self._answer_all(session, pending, requests, known)
            return await self._call_modern(session, pending.id, pending.conversation, pending.requester,
                                           pending.tool, dict(pending.arguments), progress,
                                           request_state=pending.request_state, responses=responses)
        finally:
            session.calls.pop(pending.id, None)

