"""Taking over work nobody holds: at start (an earlier run's), on a shared store a dead worker's, and a stored call
whose last answer was claimed here while another worker held it.

The store hands it over (`AsyncStore.reap_workers`: each lapsed worker's open work goes to exactly one survivor).
Every row is taken up on its own: one that cannot be read back (or whose card can no longer be built) is closed,
audited and reported in its conversation, and the rest goes on.

- **2026 calls**: for each stored call, this round's elicitation cards that are still open are parked again (no task
  waits for them; the adapters re-attach to them), answers given before are kept, and anything else open for the
  call (a sampling or roots step) is retired and asked again. A call with nothing left to wait for continues at once
  (`ToolCalls.continue_call`) on a session from the pool: if the server no longer accepts the stored state (a stdio
  server restarted with the bridge has a new key), the call is run again and identical questions get the answers
  already given (`bridge.calls.rounds`). A call that cannot be continued is abandoned with a note in its conversation.
- **Receipts**: a stored call approved by a person carries, on the rounds it sends after the restart, a new receipt of
  that approval, made from the tool card (or grant) stored with it, and only when that card was accepted for exactly
  this server, conversation, tool and arguments (`bridge.requests.receipting.approval_mismatch`).
- **Interrupted 2026 calls**: a round whose answers were taken for sending (`AsyncStore.send_round`, or the claim of
  its last card) by a worker that died before the result was out may have run at the server: it is not sent again
  (at most once) unless its server says its tools may be (`on_interrupt: resend`); the conversation is told, with the
  command that runs it again. (Taken is not always sent: the worker may have died between the claim and the send,
  the hand-over to the calls or a pooled session in between. The store cannot tell these apart without a second
  synced commit per decision, so both are told as interrupted: never sent twice, never silent.) A round taken by
  this very process (a claim here answered the last card of a call held elsewhere) is this process's to send.
- **Legacy calls**: their cards end as failed (the server session that waited for them died with its process); the
  card says so and the conversation is told. Calls that were running with no card open are reported as interrupted.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup
from mcp.types import ElicitRequest, InputRequest
from pydantic import TypeAdapter, ValidationError

from bridge.calls.rounds import ParkedCall
from bridge.calls.store_roles import ResumeStore
from bridge.calls.toolcalls import ToolCalls
from bridge.cards.broker import Broker
from bridge.cards.chat import Say
from bridge.cards.secret_answers import withheld
from bridge.config.file import Config
from bridge.door.model import ConversationKey, Interaction, Kind, Status
from bridge.errors import BridgeError
from bridge.requests.elicitation import to_result
from bridge.requests.grants import Grants
from bridge.requests.receipting import Receipting, approval_mismatch
from bridge.safety.receipts.canonical import tool_digest
from bridge.storage import PendingCall, Reaped, StoredInteraction, Unreadable
from bridge.text.plain import shorten

logger = logging.getLogger(__name__)

_INPUT_REQUEST: TypeAdapter[InputRequest] = TypeAdapter(InputRequest)

INTERRUPTED = "the bridge stopped while this was open; run the command again"
UNREADABLE_ERRORS = (ValidationError, ValueError, KeyError, TypeError, BridgeError)


class Resumer:
    def __init__(self, config: Config, store: ResumeStore, broker: Broker, calls: ToolCalls, say: Say,
                 reparked: Callable[[Interaction, str, str], None] | None = None, *,
                 receipts: Receipting | None = None, grants: Grants | None = None) -> None:
        """`reparked`: told of each card parked again (interaction, call id, input key): the open-card bounds count
        it."""
        self._config = config
        self._receipts = receipts
        self._grants = grants
        self._store = store
        self._broker = broker
        self._calls = calls
        self._say = say
        self._tg: TaskGroup | None = None
        self.resumed = anyio.Event()
        """Set once every stored 2026 call has been taken up again after a start."""
        self._reparked = reparked

    async def resume_all(self, tg: TaskGroup) -> None:
        """At start: take over what no live worker holds (on SQLite, everything the last run left open)."""
        self._tg = tg
        await self.take_over(await self._store.reap_workers(), tg)
        self.resumed.set()

    async def take_over(self, reaped: Reaped, tg: TaskGroup) -> None:
        """Close unreadable rows, finish the legacy cards of workers that stopped and tell of their interrupted
        calls, and take up their stored 2026 calls (continued in `tg`)."""
        if reaped.workers:
            logger.info("taking over the open work of %s", ", ".join(reaped.workers))
        for row in reaped.unreadable:
            await self._close_unreadable(row)
        durable = {call.id for call in reaped.pending_calls}
        open_by_call: dict[str, list[StoredInteraction]] = defaultdict(list)
        ended: dict[ConversationKey, list[str]] = {}
        told: set[tuple[str, str, str]] = set()
        for stored in reaped.interactions:
            i = stored.interaction
            if stored.pending_call is None:
                if await self._broker.retire(stored, INTERRUPTED, Status.FAILED):
                    ended.setdefault(i.conversation, []).append(_what(stored))
                    told.add((i.conversation.id(), i.server.name, i.tool))
            elif stored.pending_call in durable:
                open_by_call[stored.pending_call].append(stored)
            else:
                await self._broker.retire(stored, "the bridge restarted; run the command again")
        for conversation, what in ended.items():
            await self._say(conversation, f"The bridge stopped while {_listed(what)} waited here, so the server "
                                          "is no longer waiting for an answer: run the command again.")
        for stored in reaped.decided:
            await self._broker.show_final(stored)
        for call in reaped.pending_calls:
            await self._take_up_safely(call, open_by_call[call.id], tg)
        for running in reaped.running:
            if running.id in durable or self._calls.live(running.id):
                continue
            await self._store.end_running_call(running.id)
            if (running.conversation, running.server, running.tool) not in told:
                await self._tell(running.conversation, f"{running.server}.{running.tool} was interrupted when the "
                                                       "bridge stopped; run it again if it is still needed.")

    async def take_call(self, call_id: str) -> None:
        """Continue a stored call whose round's last answer was claimed here (while another worker held it, or held
        by nobody): it is this worker's now."""
        if self._calls.live(call_id) or self._tg is None:
            return
        pending = await self._store.pending_call(call_id)
        if pending is None:
            return
        open_cards = [s for s in await self._store.interactions_for_call(call_id) if s.status is Status.OPEN]
        await self._take_up_safely(pending, open_cards, self._tg)

    async def _take_up_safely(self, call: PendingCall, open_cards: list[StoredInteraction], tg: TaskGroup) -> None:
        try:
            await self._take_up(call, open_cards, tg)
        except UNREADABLE_ERRORS as exc:
            logger.warning("stored call %s.%s could not be resumed: %s", call.server, call.tool, exc)
            await self._abandon(call, f"its stored state could not be read ({type(exc).__name__})")

    async def _take_up(self, pending: PendingCall, open_cards: list[StoredInteraction], tg: TaskGroup) -> None:
        server = self._config.servers.get(pending.server)
        if server is None or server.disabled:
            # The config changed while the bridge was down: nobody could ever continue this call.
            await self._abandon(pending, f"there is no server named {pending.server!r} any more" if server is None
                                else f"the server {pending.server!r} is disabled in the config")
            return
        taken_here = pending.sent_by == self._store.process_id  # by a claim made here: not sent yet
        if pending.sent_by is not None and not taken_here and server.on_interrupt != "resend":
            await self._interrupted(pending)
            return
        requests = {k: _INPUT_REQUEST.validate_python(v) for k, v in pending.input_requests.items()}
        record = ParkedCall(pending.id, pending.conversation, pending.requester, pending.server, pending.tool,
                            dict(pending.arguments), pending.request_state, {}, {}, round_at=pending.created_at,
                            sent_by=None if taken_here else pending.sent_by, meta=await self._receipt_again(pending),
                            approval=pending.approval)
        waits: dict[str, StoredInteraction] = {}
        # Only this round's cards: a server may reuse a key, and an earlier round's answer is not this one's.
        for stored in await self._store.interactions_for_call(pending.id, since=pending.created_at):
            key = stored.input_key
            if key is None or not isinstance(requests.get(key), ElicitRequest) \
                    or stored.interaction.kind not in (Kind.FORM, Kind.URL):
                continue
            if stored.status is Status.OPEN:
                waits[key] = stored
                record.responses.pop(key, None)
            elif stored.outcome is not None:
                if withheld(stored.interaction, stored.outcome):
                    record.responses.pop(key, None)  # a secret answer was not kept: that one is asked again
                else:
                    record.responses[key] = to_result(stored.outcome)
                waits.pop(key, None)
        reparked = {s.interaction.id for s in waits.values()}
        for stored in open_cards:
            if stored.interaction.id not in reparked:
                await self._broker.retire(stored, "asked again after the bridge restarted")
        missing = {k: r for k, r in requests.items() if k not in record.responses and k not in waits}
        # Claimed by the task below until it has asked what is missing, so an answer meanwhile does not continue
        # the call a second time.
        record.driving = bool(missing) or not waits
        self._calls.rounds.parked[record.id] = record
        for key, stored in waits.items():
            record.waiting[key] = stored.interaction.id
            await self._broker.repark(stored.interaction, stored.card, pending.id, key)
            if self._reparked is not None and self._broker.interaction(stored.interaction.id) is not None:
                self._reparked(stored.interaction, pending.id, key)
        if record.driving:
            tg.start_soon(self._continue, record, missing)

    async def _receipt_again(self, pending: PendingCall) -> dict[str, Any] | None:
        """The `_meta` with a receipt for a call approved before the restart (the first one was in memory only),
        made again from its stored approval: a tool card accepted for exactly this call, or a grant for this tool
        that still holds here. None otherwise (the call goes on without one, and a server that needs one refuses)."""
        if self._receipts is None or pending.approval is None or not self._receipts.on_for(pending.server):
            return None
        conversation = pending.conversation.id()
        stored = await self._store.interaction(pending.approval)
        if stored is None and self._grants is not None:
            grant = await self._grants.find("tool", pending.server, pending.tool, pending.conversation)
            if grant is not None and grant.id == pending.approval:
                return await self._receipts.for_grant(
                    pending.server, conversation, pending.tool, tool_digest(pending.tool, pending.arguments),
                    grant.id, grant.given_by, pending.requester)
        why = approval_mismatch(stored, pending.server, conversation, pending.tool, pending.arguments)
        if why is not None or stored is None or stored.outcome is None:
            logger.warning("%s.%s (call %s) goes on without a receipt: its approval %s %s", pending.server,
                           pending.tool, pending.id, pending.approval, why or "")
            return None
        return await self._receipts.for_decision(stored.interaction, stored.outcome)

    async def _continue(self, record: ParkedCall, missing: dict[str, InputRequest]) -> None:
        if not missing:
            record.driving = False
        await self._calls.continue_call(record, missing)

    async def _close_unreadable(self, row: Unreadable) -> None:
        """A row that cannot be read back is closed (audited) and its conversation told; the start goes on."""
        logger.warning("closing unreadable %s row %s: %s", row.table, row.id, row.reason)
        await self._store.close_unreadable(row, f"could not be restored after the restart: {row.reason}")
        what = f"A call to {shorten(row.what, 100)}" if row.table == "pending_calls" else f"The request {row.id}"
        await self._tell(row.conversation, f"{what} could not be restored after the restart and was closed "
                                           f"({shorten(row.reason, 200)}). Run the command again if it is still "
                                           "needed.")

    async def _tell(self, conversation_id: str, text: str) -> None:
        try:
            conversation = ConversationKey.from_id(conversation_id)
        except ValueError:
            logger.warning("cannot tell conversation %r: %s", conversation_id, text)
            return
        await self._say(conversation, text)

    async def _abandon(self, pending: PendingCall, why: str) -> None:
        """Give up on a stored call: its open cards end, its row goes, and the conversation is told why."""
        await self._drop(pending, "the call could not be finished after the restart")
        await self._say(pending.conversation, f"{pending.server}.{pending.tool} could not be finished after the "
                                              f"restart: {shorten(why, 500)}")

    async def _interrupted(self, pending: PendingCall) -> None:
        """A round whose answers were sent by a worker that died before the result was out: the server may have run
        the call, so it is not sent again (at most once); the conversation hears it, and how to run it again."""
        logger.info("%s.%s (call %s) was interrupted after its answers were sent by %s; not sending them again",
                    pending.server, pending.tool, pending.id, pending.sent_by)
        await self._drop(pending, "the call was interrupted")
        await self._say(pending.conversation, interrupted_text(pending))

    async def _drop(self, pending: PendingCall, reason: str) -> None:
        # Deleted first: none of its cards' ends may continue it.
        await self._store.delete_pending_call(pending.id)
        for stored in await self._store.interactions_for_call(pending.id):
            if stored.status is Status.OPEN and self._broker.interaction(stored.interaction.id) is None:
                await self._broker.retire(stored, reason)
        await self._store.end_running_call(pending.id)
        self._calls.rounds.parked.pop(pending.id, None)


AGAIN_MAX = 300
"""Characters of arguments the interrupted-call notice repeats as a command to run the call again."""


def interrupted_text(pending: PendingCall) -> str:
    """What a conversation is told of a call interrupted after its answers went out: what happened, that nothing was
    sent again, and the command that runs it again (with its arguments when they are short)."""
    name = f"{pending.server}.{pending.tool}"
    arguments = json.dumps(dict(pending.arguments), ensure_ascii=False, separators=(",", ":"))
    command = f"call {pending.server} {pending.tool}" + (f" {arguments}" if pending.arguments else "")
    again = f"`{command}`" if len(arguments) <= AGAIN_MAX and "`" not in command else "the command again"
    return (f"{name} was interrupted after its answers were sent to the server, or as they were about to be: the "
            "bridge worker running it stopped before the result came back, so the server may have run it. It was not "
            f"sent again (a tool never runs twice without someone asking). To run it again, send {again}.")


def _what(stored: StoredInteraction) -> str:
    """A card, named for the conversation: server and tool."""
    i = stored.interaction
    return f"{i.server.name}.{i.tool}" if i.tool else f"a request from {i.server.name}"


def _listed(items: list[str]) -> str:
    shown = ", ".join(dict.fromkeys(items))
    return shown if len(items) == 1 else f"{len(items)} requests ({shown})"
