"""Resume after a restart: every stored 2026 call is picked up again and finished when its cards are answered.

Cards of the stored round that are still open are waited on again (the adapters re-attach to them); answers given
before the restart are reused; anything else open for the call (a sampling or roots step) is retired and asked again.
Cards of an earlier run that belong to no stored call (a legacy call that died with the process) are retired: no
server waits for them any more. A call that cannot be finished is abandoned with a note in its conversation.
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
from bridge.model import Kind, Status
from bridge.outbound import Say
from bridge.storage import AsyncStore, PendingCall, StoredInteraction
from bridge.text import session_error_text, shorten
from bridge.toolcalls import ToolCalls

logger = logging.getLogger(__name__)

_INPUT_REQUEST: TypeAdapter[InputRequest] = TypeAdapter(InputRequest)


class Resumer:
    def __init__(self, store: AsyncStore, broker: Broker, calls: ToolCalls, say: Say) -> None:
        self._store = store
        self._broker = broker
        self._calls = calls
        self._say = say
        self.resumed = anyio.Event()
        """Set once every stored 2026 call has been picked up again after a start."""

    async def resume_all(self, tg: TaskGroup) -> None:
        pending = await self._store.pending_calls()
        durable = {call.id for call in pending}
        for stored in await self._store.open_interactions():
            if stored.pending_call not in durable:
                await self._broker.retire(stored, "the bridge restarted; run the command again")
        for call in pending:
            tg.start_soon(self._resume_one, call)
        self.resumed.set()

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
            elif stored.outcome is not None:
                known[key] = to_result(stored.outcome)
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
