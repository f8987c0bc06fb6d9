"""Taking over work nobody holds: at start (an earlier run's) and, on a shared store, a dead worker's.

The store hands it over (`AsyncStore.reap_workers`: each lapsed worker's open work goes to exactly one survivor).
Every stored 2026 call is picked up again and finished when its cards are answered: cards of the stored round that
are still open are waited on again (the adapters re-attach to them); answers given before are reused; anything else
open for the call (a sampling or roots step) is retired and asked again. Cards of legacy calls (no stored call) end as
failed: the server session that waited for them died with its process; the card says so and the conversation is
told. A call that cannot be finished is abandoned with a note in its conversation.
"""

from __future__ import annotations

import logging

import anyio
from anyio.abc import TaskGroup
from mcp import MCPError
from mcp.types import CallToolResult, ElicitRequest, InputRequest, InputResponse
from pydantic import TypeAdapter

from bridge.broker import Broker
from bridge.elicitation import to_result
from bridge.errors import BridgeError, InputRefused, SessionError
from bridge.model import ConversationKey, Kind, Status
from bridge.outbound import Say
from bridge.secret_answers import withheld
from bridge.storage import AsyncStore, PendingCall, Reaped, StoredInteraction
from bridge.text import session_error_text, shorten
from bridge.toolcalls import ToolCalls

logger = logging.getLogger(__name__)

_INPUT_REQUEST: TypeAdapter[InputRequest] = TypeAdapter(InputRequest)

INTERRUPTED = "the bridge stopped while this was open; run the command again"


class Resumer:
    def __init__(self, store: AsyncStore, broker: Broker, calls: ToolCalls, say: Say) -> None:
        self._store = store
        self._broker = broker
        self._calls = calls
        self._say = say
        self.resumed = anyio.Event()
        """Set once every stored 2026 call has been picked up again after a start."""

    async def resume_all(self, tg: TaskGroup) -> None:
        """At start: take over what no live worker holds (on SQLite, everything the last run left open)."""
        await self.take_over(await self._store.reap_workers(), tg)
        self.resumed.set()

    async def take_over(self, reaped: Reaped, tg: TaskGroup) -> None:
        """Finish the legacy cards of workers that stopped, and resume their stored 2026 calls in `tg`."""
        if reaped.workers:
            logger.info("taking over the open work of %s", ", ".join(reaped.workers))
        durable = {call.id for call in reaped.pending_calls}
        ended: dict[ConversationKey, list[str]] = {}
        for stored in reaped.interactions:
            if stored.pending_call is None:
                if await self._broker.retire(stored, INTERRUPTED, Status.FAILED):
                    ended.setdefault(stored.interaction.conversation, []).append(_what(stored))
            elif stored.pending_call not in durable:
                await self._broker.retire(stored, "the bridge restarted; run the command again")
        for conversation, what in ended.items():
            await self._say(conversation, f"The bridge stopped while {_listed(what)} waited here, so the server "
                                          "is no longer waiting for an answer: run the command again.")
        for stored in reaped.decided:
            await self._broker.show_final(stored)
        for call in reaped.pending_calls:
            tg.start_soon(self._resume_one, call)

    async def _resume_one(self, pending: PendingCall) -> None:
        try:
            result = await self._resume(pending)
        except (MCPError, InputRefused) as exc:
            await self._abandon(pending, exc.error.message)
            return
        except BridgeError as exc:
            await self._abandon(pending, session_error_text(exc) if isinstance(exc, SessionError) else str(exc))
            return
        except Exception as exc:
            # The top of a bridge task: a call that cannot be resumed must not keep the bridge from starting.
            logger.exception("resuming %s.%s failed", pending.server, pending.tool)
            await self._abandon(pending, f"an internal error ({type(exc).__name__})")
            return
        await self._calls.report(pending.conversation, pending.server, pending.tool, result)

    async def _resume(self, pending: PendingCall) -> CallToolResult:
        requests = {k: _INPUT_REQUEST.validate_python(v) for k, v in pending.input_requests.items()}
        known: dict[str, InputResponse] = {}
        waits: dict[str, StoredInteraction] = {}
        latest: dict[str, StoredInteraction] = {}
        # Only this round's cards: a server may reuse a key, and an earlier round's answer is not this one's.
        for stored in await self._store.interactions_for_call(pending.id, since=pending.created_at):
            key = stored.input_key
            if key is not None and key in requests and isinstance(requests[key], ElicitRequest) \
                    and stored.interaction.kind in (Kind.FORM, Kind.URL):
                latest[key] = stored
        for key, stored in latest.items():
            if stored.status is Status.OPEN:
                waits[key] = stored
            elif stored.outcome is not None and not withheld(stored.interaction, stored.outcome):
                known[key] = to_result(stored.outcome)  # a secret answer was not kept: that one is asked again
        resumed = {s.interaction.id for s in waits.values()}
        for stored in await self._store.interactions_for_call(pending.id):
            if stored.status is Status.OPEN and stored.interaction.id not in resumed:
                await self._broker.retire(stored, "asked again after the bridge restarted")

        async def answered() -> dict[str, InputResponse]:
            async def wait_one(key: str, stored: StoredInteraction) -> None:
                known[key] = to_result(await self._broker.resume(stored.interaction, stored.card))

            async with anyio.create_task_group() as tg:
                for key, stored in waits.items():
                    tg.start_soon(wait_one, key, stored)
            return known

        return await self._calls.run_stored(pending, requests, answered)

    async def _abandon(self, pending: PendingCall, why: str) -> None:
        """Give up on a stored call: its open cards end, its row goes, and the conversation is told why."""
        for stored in await self._store.interactions_for_call(pending.id):
            if stored.status is Status.OPEN and self._broker.interaction(stored.interaction.id) is None:
                await self._broker.retire(stored, "the call could not be finished after the restart")
        await self._store.delete_pending_call(pending.id)
        await self._say(pending.conversation, f"{pending.server}.{pending.tool} could not be finished after the "
                                              f"restart: {shorten(why, 500)}")


def _what(stored: StoredInteraction) -> str:
    """A card, named for the conversation: server and tool."""
    i = stored.interaction
    return f"{i.server.name}.{i.tool}" if i.tool else f"a request from {i.server.name}"


def _listed(items: list[str]) -> str:
    shown = ", ".join(dict.fromkeys(items))
    return shown if len(items) == 1 else f"{len(items)} requests ({shown})"
