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
process only: the store records who sends it, synced, before it goes (the claim of the round's last card does it in
its own commit, `AsyncStore.claim_parked`; any other way to the round claims it with `AsyncStore.send_round` just
before sending), and any other that reaches for the same round (a click claimed on one worker as another takes the
call over) stops there.

A server may no longer accept the stored state (it restarted with an ephemeral key, or the state's TTL passed) or
may have died while its card waited. Then the call is run again on a fresh session, and re-asked inputs identical to
ones already answered (same key, same schema or URL) get the same answers; the rest are asked again, with the card
saying why.

The parts, each its own module: calls parked between rounds (`bridge.calls.parked_calls`), answer reuse when a call
is run again (`bridge.calls.answer_reuse`), and a server dying during a call (`bridge.calls.session_death`).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping
from typing import Any

import anyio
from mcp import MCPError
from mcp.client import ClientRequestContext
from mcp.shared.dispatcher import ProgressFnT
from mcp.types import (
    CallToolResult,
    ElicitRequest,
    ErrorData,
    InputRequest,
    InputRequiredResult,
    InputResponse,
)

from bridge.calls.answer_reuse import RERUN_NOTE, Signature, answers_given, invalid_state, signature
from bridge.calls.parked_calls import POSTING, Call, ParkedCall, ParkedCalls
from bridge.calls.session_death import guarded
from bridge.calls.store_roles import RoundStore
from bridge.cards.broker import Broker
from bridge.cards.held import Parked
from bridge.door.model import Interaction, Outcome
from bridge.errors import INTERNAL_ERROR, InputRefused, ServerGoneError
from bridge.requests.context_lookup import Audience
from bridge.requests.receipting import Receipting
from bridge.requests.request_context import CURRENT
from bridge.servers.mcp_session import Session
from bridge.servers.sessions import SessionPool

__all__ = ["Call", "ParkedCall", "Rounds", "guarded"]

MAX_ROUNDS = 10


class Rounds:
    def __init__(self, pool: SessionPool, broker: Broker, store: RoundStore, audience: Audience,
                 receipts: Receipting | None = None) -> None:
        self._receipts = receipts
        self._pool = pool
        self._broker = broker
        self._store = store
        self._audience = audience
        self._parked = ParkedCalls(broker, store, receipts)
        self.parked: dict[str, ParkedCall] = self._parked.calls
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
                        # Answers to a stored round go out once: taken (and synced) before they are sent, by the
                        # claim of its last card or here.
                        if record is not None and responses is not None \
                                and not await self._parked.send_round(call, record):
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
                    reuse = await answers_given(self._store, self._receipts, call.id)
                    asked_before = set(reuse)
                    continue
                if not isinstance(result, InputRequiredResult):
                    if call.keep_pending:
                        self.parked.pop(call.id, None)
                    else:
                        await self._parked.ended(call.id)
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
                    record = await self._parked.store_round(call, arguments, state, requests, meta, approval)
                    for key, request in requests.items():
                        given = reuse.pop(key, None) if reuse else None
                        if given is not None and given[0] == signature(request):
                            record.responses[key] = given[1]
                    outstanding = {k: r for k, r in requests.items() if k not in record.responses}
                    if outstanding:
                        with self._on(session, call):
                            await self.answer(session, record, outstanding, park=park, again=asked_before)
                if record.waiting:
                    # Parked. A card answered while the others were being posted may have taken the round here (the
                    # store saw no other open yet): it goes back, for the claim of the round's last card to take.
                    await self._parked.release(record)
                    return None
                self.parked.pop(call.id, None)
                responses = record.responses
            raise MCPError(code=INTERNAL_ERROR, message=f"{call.tool} still needed input after {MAX_ROUNDS} rounds; "
                                                        "giving up")
        except BaseException:
            # Stopped, refused, failed or crashed: the call is over, so it must not come back after a restart. Only
            # a shutdown keeps it, to be answered then (a round taken here and not sent goes back as the store closes).
            if not self._broker.closing:
                await self._parked.ended(call.id)
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
                    # Asked again (an answer not kept): the round is not to be sent until that card is answered,
                    # and the claim that answers it takes it.
                    await self._parked.release(record)
                    return None
        except BaseException:
            if not self._broker.closing:
                await self._parked.ended(call.id)
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
            parks = park and isinstance(request, ElicitRequest)
            ctx = self._audience.context(record.server, session, record.conversation, record.requester,
                                         record.tool, pending_call=record.id, input_key=key, park=parks,
                                         note=RERUN_NOTE if key in again else "")
            if parks:
                # Waiting from before its card goes out: a person may answer it before `Parked` gets here, and that
                # answer (`ParkedCalls.answered`) is then kept, not dropped for a card not yet known here.
                record.waiting[key] = POSTING
            token = CURRENT.set(ctx)
            try:
                meta = request.params.meta if request.params else None
                answer = await client_session.dispatch_input_request(
                    ClientRequestContext(session=client_session, request_id=key, meta=meta), request)
            except Parked as parked:
                if record.waiting.get(key) == POSTING:  # else answered already (its answer is in `responses`)
                    record.waiting[key] = parked.interaction_id
                return
            finally:
                CURRENT.reset(token)
                if record.waiting.get(key) == POSTING:
                    del record.waiting[key]  # not parked after all: answered at once, refused or failed
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
            await self._parked.ended(record.id)
            raise InputRefused(refusal[0])

    # -- parked calls --------------------------------------------------------------------------------------------

    async def answered(self, call_id: str, key: str, outcome: Outcome, last: bool,
                       interaction: Interaction) -> ParkedCall | str | None:
        return await self._parked.answered(call_id, key, outcome, last, interaction)

    async def stop(self, call_id: str, reason: str) -> ParkedCall | None:
        return await self._parked.stop(call_id, reason)

    @contextlib.contextmanager
    def _on(self, session: Session, call: Call) -> Iterator[None]:
        """The call is in flight on `session` (so the session is busy, and not closed for room or idleness)."""
        session.calls[call.id] = call
        try:
            yield
        finally:
            session.calls.pop(call.id, None)
            self._pool.released(session)
