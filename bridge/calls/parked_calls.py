"""Calls parked between rounds: a 2026 call whose round waits on parked cards is a small `ParkedCall` here (no task,
no session) and a row in the store. Its round is stored before any card is posted; answers land as its cards end,
and the store says which worker continues it and which process sends the round's answers, once: the claim that
answers the round's last card takes both in its one synced commit (`AsyncStore.claim_parked`); a round reached
another way (a take-over, a round answered without a card) is taken just before it is sent (`AsyncStore.send_round`).
A call that ends, or is stopped, is deleted from the store before its open cards are withdrawn.

Taken is what the store calls sent: after a crash the server may have had it. A process killed between its claim and
the answers reaching the server (the hand-over to the calls, a pooled session) leaves the round taken by a dead
process: whoever takes the call over tells the conversation it was interrupted, or sends it again for a server that
allows it (`on_interrupt: resend`), as for a round that went out; never sent twice, never silent. A process that stops
cleanly before sending gives the round back as it stops (before its lease ends), to be sent by whoever takes the
call up.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
from mcp.types import ElicitResult, InputRequest, InputResponse

from bridge.calls.store_roles import RoundStore
from bridge.cards.broker import Broker
from bridge.door.model import Actor, ConversationKey, Interaction, MessageRef, Outcome, Status
from bridge.errors import StoreError
from bridge.requests.elicitation import receipted, to_result
from bridge.requests.receipting import Receipting
from bridge.servers.mcp_session import CallInfo
from bridge.storage import PendingCall

logger = logging.getLogger(__name__)

POSTING = ""
"""What `ParkedCall.waiting` holds for an input whose card is being posted: a person may answer it, and its end be
handed on, before its posting returns (`Parked`) with the interaction's id (on a shared store, the card's reference is
still being committed then). Never an interaction's id."""


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
    """Input key -> id of its parked interaction (or `POSTING`), for the inputs of this round still waiting for a
    person."""
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


class ParkedCalls:
    def __init__(self, broker: Broker, store: RoundStore, receipts: Receipting | None) -> None:
        self._receipts = receipts
        self._broker = broker
        self._store = store
        self.calls: dict[str, ParkedCall] = {}
        """Calls whose round waits on parked cards (and calls being continued), by call id."""

    async def answered(self, call_id: str, key: str, outcome: Outcome, last: bool,
                       interaction: Interaction) -> ParkedCall | str | None:
        """A parked card ended (its claim durable): record the answer. What to continue now, if the store says this
        was the last open card of its round (then the call is this worker's, whoever held it): the parked call, or the
        id of a call held by no one here (taken over meanwhile), to continue from the store. `interaction`: the
        card's, as stored (what its receipt names)."""
        record = self.calls.get(call_id)
        if record is None:
            return call_id if last else None
        if (waited := record.waiting.get(key)) is not None:
            result = await self._result(waited or interaction.id, outcome, interaction)
            # Waiting until its answer is in: a task still posting this card (`POSTING`) must not go on without it.
            # Meanwhile that task may have parked it (`POSTING` became its id), or another card's end read it from
            # the store.
            if record.waiting.get(key) in (waited, interaction.id):
                del record.waiting[key]
                record.responses[key] = result
        if record.driving:
            return None  # the task answering the rest of this round continues the call itself
        if not last:
            if not record.waiting:
                # Every card held here is answered, yet one is open in the store: claimed on another worker, which
                # continues the call once it is answered there. Nothing of it is held here any more.
                self.calls.pop(call_id, None)
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

    async def _result(self, interaction_id: str, outcome: Outcome, interaction: Interaction) -> ElicitResult:
        """A parked card's answer, with its receipt (the card's request digest is in the store)."""
        if self._receipts is None or outcome.status is not Status.ACCEPTED:
            return to_result(outcome)
        if interaction.id == interaction_id:
            return await receipted(self._receipts, interaction, outcome)
        stored = await self._store.interaction(interaction_id)
        return await receipted(self._receipts, stored.interaction if stored else None, outcome)

    async def send_round(self, call: Call, record: ParkedCall) -> bool:
        """Whether this worker sends the stored round's answers: the store says so, once, and durably before they
        go (a click's claim and a take-over may both reach for the same round; the other one stops here). A round
        whose last card's claim here took it costs no second commit."""
        if await self._store.send_round(call.id, record.round_at, taking_from=record.sent_by):
            return True
        logger.info("the round of call %s was continued by another worker (or ended); not sending it here", call.id)
        if self.calls.get(call.id) is record:
            del self.calls[call.id]
        return False

    async def release(self, record: ParkedCall) -> None:
        """A round this process's claim took is asked again (an answer that was not kept) rather than sent: the
        sending goes back, and the claim that answers the card asked again takes it."""
        try:
            await self._store.release_round(record.id, record.round_at)
        except StoreError as exc:
            # Kept as taken: the call is then told as interrupted after a restart, never sent twice.
            logger.warning("could not give back the round of call %s: %s", record.id, exc)

    async def stop(self, call_id: str, reason: str) -> ParkedCall | None:
        """Stop a parked call: its open cards end as cancelled and it is forgotten."""
        record = self.calls.get(call_id)
        if record is not None:
            await self.ended(call_id, reason)
        return record

    async def store_round(self, call: Call, arguments: dict[str, Any], state: str | None,
                           requests: Mapping[str, InputRequest], meta: dict[str, Any] | None,
                           approval: str | None) -> ParkedCall:
        at = time.time()  # the round's name, kept here to claim its sending (`send_round`)
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
        self.calls[call.id] = record
        return record

    async def ended(self, call_id: str, reason: str = "the call ended without this answer") -> None:
        # Deleted before its cards are withdrawn: a withdrawal's claim then never finds the call to continue.
        with anyio.CancelScope(shield=True):
            await self._store.delete_pending_call(call_id)
        record = self.calls.pop(call_id, None)
        for interaction_id in record.waiting.values() if record else ():
            self._broker.withdraw(interaction_id, reason)
