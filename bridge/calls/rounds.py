"""The 2026-07-28 input-required driver, and calls parked between rounds.

A 2026 server answers `tools/call` with `input_required`: input requests and an opaque `requestState`. The driver
stores the pending call (server, tool, arguments, state, requests) *before* any card is posted, then dispatches each
request through the SDK's callback table (`ClientSession.dispatch_input_request`), so the same handler objects answer
both eras; the request's context travels in `bridge.requests.request_context.CURRENT`.

Parking: when a call may be parked (its result is reported in its conversation, not awaited by a caller), an
elicitation's card is posted and nothing waits for it (`bridge.cards.broker.Parked`): no task, no session, no server
process is held while a person thinks. The call is a small `ParkedCall` here and a row in the store. When its last open
card of the round is answered, the broker hands the outcome on (`bridge.calls.continuing`), and the call continues on
a session taken from the pool (waiting for room if need be: `max_sessions` bounds running calls, not waiting people); a
restart takes the same path (`bridge.calls.resume`). Whoever continues, the answers to a stored round are sent by one
process only: it claims the round in the store (`AsyncStore.send_round`, synced) just before sending, and any other
that reaches for the same round (a click claimed on one worker as another takes the call over) stops there.

A server may no longer accept the stored state (it restarted with an ephemeral key, or the state's TTL passed) or
may have died while its card waited. Then the call is run again on a fresh session, and re-asked inputs identical to
ones already answered (same key, same schema or URL) get the same answers; the rest are asked again, with the card
saying why.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import time
from collections.abc import Awaitable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
from mcp import MCPError
from mcp.client import ClientRequestContext
from mcp.shared.dispatcher import ProgressFnT
from mcp.types import (
    CallToolResult,
    ElicitRequest,
    ElicitRequestURLParams,
    ElicitResult,
    ErrorData,
    InputRequest,
    InputRequiredResult,
    InputResponse,
)

from bridge.calls.store_roles import RoundStore
from bridge.cards.broker import Broker
from bridge.cards.held import Parked
from bridge.door.model import Actor, ConversationKey, Interaction, Kind, MessageRef, Outcome, Status
from bridge.errors import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    InputRefused,
    MessageTooLarge,
    ServerGoneError,
)
from bridge.requests.context_lookup import Audience
from bridge.requests.elicitation import receipted, to_result
from bridge.requests.receipting import Receipting
from bridge.requests.request_context import CURRENT
from bridge.servers.mcp_session import CallInfo, Session
from bridge.servers.sessions import SessionPool
from bridge.storage import PendingCall, StoredInteraction

logger = logging.getLogger(__name__)

MAX_ROUNDS = 10
RERUN_NOTE = "the server had lost this call's state (it restarted, or too much time passed), so the call was run again"
Signature = tuple[str, str]


class Call(CallInfo, Protocol):
    @property
    def id(self) -> str: ...

    @property
    def server(self) -> str: ...

    @property
    def status(self) -> MessageRef | None:
        """The call's status line, if one is shown: a parked call keeps it, so its continuation edits the same line."""
        ...

    @property
    def keep_pending(self) -> bool:
        """Whether the stored call outlives its result until the caller has reported it (a continued call: if the
        worker dies before the result is out, whoever takes the call over knows it was interrupted)."""
        ...


@dataclass(eq=False, slots=True)
class ParkedCall:
    """A 2026 call between rounds: what continuing it needs, and which of this round's inputs are still open."""

    id: str
    conversation: ConversationKey
    requester: Actor | None
    server: str
    tool: str
    arguments: dict[str, Any]
    request_state: str | None
    responses: dict[str, InputResponse]
    waiting: dict[str, str]
    """Input key -> id of its parked interaction, for the inputs of this round still waiting for a person."""
    driving: bool = False
    """A task is still answering other inputs of this round; it continues the call itself when it is done."""
    round_at: float = 0.0
    """When this round was stored (`PendingCall.created_at`): what names it to `AsyncStore.send_round`."""
    sent_by: str | None = None
    """A dead process that sent this round before, when it is sent again on purpose (`on_interrupt: resend`)."""
    meta: dict[str, Any] | None = None
    """The `_meta` every round of the call carries (its approval's receipt). Kept in memory only: a call taken up
    after a restart gets a receipt made again from its stored approval (`approval`)."""
    approval: str | None = None
    """The tool card whose acceptance, or the grant that, let the call run (stored with each round,
    `PendingCall.approval`)."""
    status: MessageRef | None = None
    """The call's status line in this process (none after a restart or a take-over): continuing edits it."""


def invalid_state(exc: MCPError) -> bool:
    """The server refused the `requestState` we echoed (the SDK's boundary answers -32602 with this reason)."""
    data = exc.error.data
    return exc.code == INVALID_PARAMS and (
        (isinstance(data, Mapping) and data.get("reason") == "invalid_request_state")
        or "requeststate" in exc.error.message.casefold())


def signature(request: InputRequest) -> Signature | None:
    """What makes two asks the same question: the form's schema, or the URL; None for other kinds."""
    if not isinstance(request, ElicitRequest):
        return None
    if isinstance(request.params, ElicitRequestURLParams):
        return ("url", request.params.url)
    return ("form", json.dumps(request.params.requested_schema, sort_keys=True))


def stored_signature(stored: StoredInteraction) -> Signature | None:
    interaction = stored.interaction
    if interaction.kind is Kind.URL:
        return ("url", interaction.url)
    if interaction.kind is Kind.FORM:
        return ("form", json.dumps(dict(interaction.form.schema), sort_keys=True))
    return None


async def guarded(pool: SessionPool, session: Session, request: Awaitable[Any]) -> Any:
    """Await an MCP request, turning a dead connection into ServerGoneError and dropping the session, and a message
    the transport refused (`limits.message_size`) into MessageTooLarge."""
    try:
        return await request
    except MCPError as exc:
        if (refused := _refused(pool, session, exc.error.message)) is not None:
            raise refused from exc
        if exc.code == CONNECTION_CLOSED:
            raise gone(pool, session, exc) from exc
        raise
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream) as exc:
        raise gone(pool, session, exc) from exc


def _refused(pool: SessionPool, session: Session, message: str) -> MessageTooLarge | None:
    refused = session.bound.explains(message) if session.bound is not None else None
    if refused is not None and refused.restarts:
        pool.mark_gone(session, str(refused))
    return refused


def gone(pool: SessionPool, session: Session, exc: BaseException) -> ServerGoneError | MessageTooLarge:
    if (refused := _refused(pool, session, str(exc))) is not None:
        return refused
    tail = session.stderr_tail()
    pool.mark_gone(session, str(exc) or type(exc).__name__)
    return ServerGoneError(session.server.name, f"{session.server.name} stopped during the call", tail)


class Rounds:
    def __init__(self, pool: SessionPool, broker: Broker, store: RoundStore, audience: Audience,
                 receipts: Receipting | None = None) -> None:
        self._receipts = receipts
        self._pool = pool
        self._broker = broker
        self._store = store
        self._audience = audience
        self.parked: dict[str, ParkedCall] = {}
        """Calls whose round waits on parked cards (and calls being continued), by call id."""

    # -- driving -------------------------------------------------------------------------------------------------

    async def drive(self, call: Call, arguments: dict[str, Any], progress: ProgressFnT | None, *, park: bool,
                    session: Session | None = None, record: ParkedCall | None = None,
                    meta: dict[str, Any] | None = None, approval: str | None = None) -> CallToolResult | None:
        """Run a 2026 call to its result, or until it is parked (then None). Continues `record` when given. `meta`
        goes with every round (the same receipt: a server consumes it when it acts, not when it asks); `approval`
        (the card that approved the call) is stored with each round."""
        meta = meta if meta is not None else record.meta if record else None
        approval = approval if approval is not None else record.approval if record else None
        state = record.request_state if record else None
        responses: dict[str, InputResponse] | None = record.responses if record else None
        reuse: dict[str, tuple[Signature, InputResponse]] | None = None
        asked_before: set[str] = set()
        retried_gone = rerun = False
        try:
            for _ in range(MAX_ROUNDS):
                if session is None or session.client is None:
                    session = await self._pool.get(call.conversation, call.server, call.requester, wait=math.inf)
                try:
                    with self._on(session, call):
                        assert session.client is not None
                        # Answers to a stored round go out once: claimed (and synced) just before they are sent.
                        if record is not None and responses is not None and not await self._send_round(call, record):
                            return None
                        result = await guarded(self._pool, session, session.client.session.call_tool(
                            call.tool, arguments, progress_callback=progress, input_responses=responses,
                            request_state=state, allow_input_required=True, meta=meta))  # type: ignore[arg-type]
                except ServerGoneError:
                    if responses is None or retried_gone:
                        raise
                    # It died while its card waited: once more, same state, on a fresh session (and process).
                    retried_gone, session = True, None
                    continue
                except MCPError as exc:
                    if rerun or state is None or not invalid_state(exc):
                        raise
                    rerun, state, responses = True, None, None
                    reuse = await self._answers_given(call.id)
                    asked_before = set(reuse)
                    continue
                if not isinstance(result, InputRequiredResult):
                    if call.keep_pending:
                        self.parked.pop(call.id, None)
                    else:
                        await self._ended(call.id)
                    assert isinstance(result, CallToolResult)
                    return result
                state = result.request_state
                requests = dict(result.input_requests or {})
                if not requests:
                    # A state-only round: the server wants the same call again with its state (SEP-2322 backoff).
                    await anyio.sleep(0.1)
                    responses = None
                    continue
                # Held while the round is stored: the session is not closed for room before its requests are asked.
                with self._pool.hold(session):
                    record = await self._store_round(call, arguments, state, requests, meta, approval)
                    for key, request in requests.items():
                        given = reuse.pop(key, None) if reuse else None
                        if given is not None and given[0] == signature(request):
                            record.responses[key] = given[1]
                    outstanding = {k: r for k, r in requests.items() if k not in record.responses}
                    if outstanding:
                        with self._on(session, call):
                            await self.answer(session, record, outstanding, park=park, again=asked_before)
                if record.waiting:
                    return None
                self.parked.pop(call.id, None)
                responses = record.responses
            raise MCPError(code=INTERNAL_ERROR, message=f"{call.tool} still needed input after {MAX_ROUNDS} rounds; "
                                                        "giving up")
        except BaseException:
            # Stopped, refused, failed or crashed: the call is over, so it must not come back after a restart. Only
            # a shutdown keeps it, to be answered then.
            if not self._broker.closing:
                await self._ended(call.id)
            raise

    async def resume(self, call: Call, record: ParkedCall, missing: Mapping[str, InputRequest],
                     progress: ProgressFnT | None) -> CallToolResult | None:
        """Continue a parked or restored call: ask what its round still lacks (after a restart), then drive it on
        with the answers. Returns None when it is parked again."""
        session: Session | None = None
        try:
            if missing:
                session = await self._pool.get(call.conversation, call.server, call.requester, wait=math.inf)
                with self._on(session, call):
                    await self.answer(session, record, missing, park=True)
                if record.waiting:
                    return None
        except BaseException:
            if not self._broker.closing:
                await self._ended(call.id)
            raise
        self.parked.pop(record.id, None)
        return await self.drive(call, record.arguments, progress, park=True, session=session, record=record)

    async def answer(self, session: Session, record: ParkedCall, requests: Mapping[str, InputRequest], *,
                     park: bool, again: set[str] | frozenset[str] = frozenset()) -> None:
        """Answer input requests of `record`'s round: each response lands in `record.responses`, each parked card in
        `record.waiting`; the cards of keys in `again` say why they are asked again. The first refusal withdraws the
        rest and ends the call (InputRefused)."""
        assert session.client is not None
        client_session = session.client.session
        refusal: list[ErrorData] = []

        async def one(key: str, request: InputRequest, cancel: anyio.CancelScope | None) -> None:
            ctx = self._audience.context(record.server, session, record.conversation, record.requester,
                                         record.tool, pending_call=record.id, input_key=key,
                                         park=park and isinstance(request, ElicitRequest),
                                         note=RERUN_NOTE if key in again else "")
            token = CURRENT.set(ctx)
            try:
                meta = request.params.meta if request.params else None
                answer = await client_session.dispatch_input_request(
                    ClientRequestContext(session=client_session, request_id=key, meta=meta), request)
            except Parked as parked:
                record.waiting[key] = parked.interaction_id
                return
            finally:
                CURRENT.reset(token)
            if isinstance(answer, ErrorData):
                refusal.append(answer)
                if cancel is not None:
                    cancel.cancel()
            else:
                record.responses[key] = answer

        record.driving = True
        try:
            if len(requests) == 1:
                await one(*next(iter(requests.items())), None)  # one request needs no task group
            else:
                async with anyio.create_task_group() as tg:
                    for key, request in requests.items():
                        tg.start_soon(one, key, request, tg.cancel_scope)
        finally:
            record.driving = False
        if refusal:
            await self._ended(record.id)
            raise InputRefused(refusal[0])

    # -- parked calls --------------------------------------------------------------------------------------------

    async def answered(self, call_id: str, key: str, outcome: Outcome, last: bool,
                       interaction: Interaction | None = None) -> ParkedCall | str | None:
        """A parked card ended (its claim durable, its card final): record the answer. What to continue now, if the
        store says this was the last open card of its round (then the call is this worker's, whoever held it): the
        parked call, or the id of a call held by no one here (taken over meanwhile), to continue from the store.
        `interaction`: the card's, as stored (else it is read back for the receipt)."""
        record = self.parked.get(call_id)
        if record is None:
            return call_id if last else None
        if (interaction_id := record.waiting.pop(key, None)) is not None:
            record.responses[key] = await self._result(interaction_id, outcome, interaction)
        if record.driving:
            return None  # the task answering the rest of this round continues the call itself
        if not last:
            if not record.waiting:
                # Every card held here is answered, yet one is open in the store: claimed on another worker, which
                # continues the call once it is answered there. Nothing of it is held here any more.
                self.parked.pop(call_id, None)
            return None
        if record.waiting:
            # Answered on other workers before this one heard: their answers are in the store.
            await self._answers_from_store(record)
        return record

    async def _answers_from_store(self, record: ParkedCall) -> None:
        for stored in await self._store.interactions_for_call(record.id):
            key = stored.input_key
            if key is not None and record.waiting.get(key) == stored.interaction.id and stored.outcome is not None:
                self._broker.drop_parked(stored.interaction.id)
                del record.waiting[key]
                record.responses[key] = await receipted(self._receipts, stored.interaction, stored.outcome)

    async def _result(self, interaction_id: str, outcome: Outcome, interaction: Interaction | None) -> ElicitResult:
        """A parked card's answer, with its receipt (the card's request digest is in the store)."""
        if self._receipts is None or outcome.status is not Status.ACCEPTED:
            return to_result(outcome)
        if interaction is not None and interaction.id == interaction_id:
            return await receipted(self._receipts, interaction, outcome)
        stored = await self._store.interaction(interaction_id)
        return await receipted(self._receipts, stored.interaction if stored else None, outcome)

    async def _send_round(self, call: Call, record: ParkedCall) -> bool:
        """Whether this worker sends the stored round's answers: the store says so, once, and durably before they
        go (a click's claim and a take-over may both reach for the same round; the other one stops here)."""
        if await self._store.send_round(call.id, record.round_at, taking_from=record.sent_by):
            return True
        logger.info("the round of call %s was continued by another worker (or ended); not sending it here", call.id)
        if self.parked.get(call.id) is record:
            del self.parked[call.id]
        return False

    async def stop(self, call_id: str, reason: str) -> ParkedCall | None:
        """Stop a parked call: its open cards end as cancelled and it is forgotten."""
        record = self.parked.get(call_id)
        if record is not None:
            await self._ended(call_id, reason)
        return record

    async def _store_round(self, call: Call, arguments: dict[str, Any], state: str | None,
                           requests: Mapping[str, InputRequest], meta: dict[str, Any] | None,
                           approval: str | None) -> ParkedCall:
        at = time.time()  # the round's name, kept here to claim its sending (`_send_round`)
        pending = PendingCall(
            id=call.id, conversation=call.conversation, server=call.server, tool=call.tool, arguments=arguments,
            request_state=state, input_requests={k: r.model_dump(mode="json", by_alias=True, exclude_none=True)
                                                 for k, r in requests.items()},
            requester=call.requester, created_at=at, approval=approval)
        # Written behind: the round's first card carries it to the store before that card is posted (and is refused
        # if it did not get there), so a crash once anything is shown can be resumed.
        await self._store.save_pending_call(pending)
        record = ParkedCall(call.id, call.conversation, call.requester, call.server, call.tool, arguments, state,
                            {}, {}, round_at=at, meta=meta, approval=approval, status=call.status)
        self.parked[call.id] = record
        return record

    async def _ended(self, call_id: str, reason: str = "the call ended without this answer") -> None:
        # Deleted before its cards are withdrawn: a withdrawal's claim then never finds the call to continue.
        with anyio.CancelScope(shield=True):
            await self._store.delete_pending_call(call_id)
        record = self.parked.pop(call_id, None)
        for interaction_id in record.waiting.values() if record else ():
            self._broker.withdraw(interaction_id, reason)

    async def _answers_given(self, call_id: str) -> dict[str, tuple[Signature, InputResponse]]:
        """Every answer a person gave to this call's elicitations, latest per input key, with what it answered."""
        given: dict[str, tuple[Signature, InputResponse]] = {}
        for stored in await self._store.interactions_for_call(call_id):
            sig = stored_signature(stored)
            outcome = stored.outcome
            if stored.input_key is None or sig is None or outcome is None:
                continue
            if outcome.status is Status.ACCEPTED or (outcome.by is not None and outcome.status is not Status.FAILED):
                given[stored.input_key] = (sig, await receipted(self._receipts, stored.interaction, outcome))
        return given

    @contextlib.contextmanager
    def _on(self, session: Session, call: Call) -> Iterator[None]:
        """The call is in flight on `session` (so the session is busy, and not closed for room or idleness)."""
        session.calls[call.id] = call
        try:
            yield
        finally:
            session.calls.pop(call.id, None)
            self._pool.released(session)
