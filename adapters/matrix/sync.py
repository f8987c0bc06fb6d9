"""The sync loop and event intake: syncing, staying logged in, E2EE upkeep, and handing events over in order.

Events arrive from the sync through the client's callbacks, which only collect them; after each sync they are
queued (history from before the bot joined a room left out), followed by the sync token, and one task hands them to
`handle` in order and then saves the token. So a slow send never stalls syncing, two events of one card are never
handled at once, and a stop never skips events that were queued but not yet handled.
"""

from __future__ import annotations

import logging
import math
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from adapters.matrix.client import LoginLost, MatrixClient, RoomEvent, RoomKey, UnknownToken
from adapters.matrix.login import load_sync_token, log_in_again, save_sync_token
from adapters.matrix.outbox import Connection
from adapters.matrix.settings import MatrixSettings
from bridge.door.ports import AdapterState, Leadership
from bridge.errors import AdapterError, PlatformAPIError, RateLimited

Lead = Callable[[], AbstractAsyncContextManager[Leadership]]
"""Leadership of this bot account's sync loop across the bridge's workers (`Inbound.leadership`)."""

logger = logging.getLogger(__name__)

MAX_UNDECRYPTED = 500
"""Encrypted events kept until their room key arrives (the oldest are dropped)."""

Handle = Callable[[RoomEvent], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class _Synced:
    """Queued after the events of one sync: once they are handled, the sync token can be saved."""

    token: str


class Intake:
    def __init__(self, client: MatrixClient, settings: MatrixSettings, connection: Connection,
                 handle: Handle, shared: AdapterState | None = None) -> None:
        """`shared`: state all workers see, where the sync token is kept for whichever worker leads next."""
        self.client = client
        self._shared = shared
        self.settings = settings
        self.connection = connection
        self.handle = handle
        """Called with each new event, one at a time."""
        self.device_id = ""
        self._batch: list[RoomEvent] = []
        """What the sync in progress brought (the client's callbacks collect it; `_flush` queues it)."""
        self._joined_at: dict[str, int] = {}
        """Per room, the server time of the bot's own join: older timeline events are history, not new."""
        self._undecrypted: OrderedDict[str, RoomEvent] = OrderedDict()
        self._inbox: MemoryObjectSendStream[RoomEvent | _Synced] | None = None

    def listen(self, device_id: str) -> None:
        """Start collecting what syncs bring (once logged in as `device_id`)."""
        self.device_id = device_id
        self.client.on_events(self._collect)
        self.client.on_room_keys(self._on_room_key)

    async def run(self, *alongside: Callable[[], Coroutine[Any, Any, None]], lead: Lead | None = None,
                  on_lead: Callable[[], Awaitable[object]] | None = None) -> None:
        """Sync and hand events over until cancelled, with the `alongside` tasks; raises `LoginLost` (not in an
        ExceptionGroup) when the login is gone for good. With `lead`, only while this worker leads the account's
        sync: the others sync once (room state, needed to send) and wait to take over; `on_lead` runs each time
        this worker becomes the leader, before its first sync (so before any event it will hand over)."""
        send, receive = anyio.create_memory_object_stream[RoomEvent | _Synced](math.inf)
        lost: LoginLost | None = None
        async with anyio.create_task_group() as tg, send, receive:
            self._inbox = send
            tg.start_soon(self._hand_over, receive)
            for task in alongside:
                tg.start_soon(task)
            try:
                await self._sync_loop(load_sync_token(self.settings.store_path, self.device_id), lead, on_lead)
            except LoginLost as exc:
                lost = exc  # raised below, not wrapped in the task group's ExceptionGroup
                tg.cancel_scope.cancel()
            finally:
                self._inbox = None
        if lost is not None:
            raise lost

    async def _sync_loop(self, resume_from: str | None, lead: Lead | None = None,
                         on_lead: Callable[[], Awaitable[object]] | None = None) -> None:
        """Sync until cancelled. The first sync fetches room state only (nio keeps no rooms across restarts, and
        it needs them to send), so room history is never replayed as new; then, after a restart, syncing goes on
        from the stored token, and whatever happened while the bridge was down is handled. Under `lead`, the
        syncs after the first wait for leadership and stop if it is lost; a new leader goes on from the token the
        last one saved once it had handled the events before it."""
        await self._sync_until_done(resume_from, first=True)
        if lead is None:
            await self._sync_until_done(None, first=False)
            return
        while True:
            async with lead() as lease:
                logger.info("leading the Matrix sync of %s", self.client.user_id)
                if self._shared is not None and (token := await self._shared.get(self._token_key)):
                    self.client.next_batch = token
                if on_lead is not None:
                    await on_lead()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_cancel_when, lease.lost, tg.cancel_scope)
                    await self._sync_until_done(None, first=False)
            logger.warning("lost the lead of the Matrix sync of %s; waiting to lead again", self.client.user_id)

    @property
    def _token_key(self) -> str:
        return f"sync_token/{self.client.user_id}"

    async def _sync_until_done(self, resume_from: str | None, *, first: bool) -> None:
        """The first sync (`first`: returns after it), or every later one (never returns)."""
        delay = 1.0
        while True:
            try:
                await self.client.sync(self.settings.sync_timeout_ms, state_only=first)
            except RateLimited as exc:
                await anyio.sleep(max(exc.retry_after, 1.0))
                continue
            except UnknownToken as exc:
                await self._log_in_again(exc)
                continue
            except PlatformAPIError as exc:
                logger.warning("matrix sync failed, retrying in %.0fs: %s", delay, exc)
                self.connection.failing = f"syncing with the homeserver fails: {exc}"
                await anyio.sleep(delay)
                delay = min(delay * 2, 60.0)
                continue
            delay, self.connection.failing = 1.0, ""
            if first and resume_from:
                self.client.next_batch = resume_from
            self._flush()
            if not self.connection.ready.is_set():
                self.connection.up()
            await self.keep_keys()
            if first:
                return

    def _flush(self) -> None:
        """Queue the events of the sync that just ended, then its token, which is saved once the events before it
        are handled (a stop in between replays them after the restart instead of losing them).

        The sync after the bot joins a room replays that room's recent history; the bot's own join event (in the same
        timeline) marks where history ends, so nothing said before it is taken as new."""
        batch, self._batch = self._batch, []
        me = self.client.user_id
        for event in batch:
            if event.kind == "member" and event.state_key == me and event.membership == "join" \
                    and event.prev_membership != "join":
                self._joined_at[event.room_id] = event.timestamp
        if self._inbox is None:
            return
        for event in batch:
            if event.kind == "member":
                continue
            if event.kind != "invite" and event.timestamp < self._joined_at.get(event.room_id, 0):
                continue  # from before the bot joined
            self._inbox.send_nowait(event)
        if self.client.next_batch:
            self._inbox.send_nowait(_Synced(self.client.next_batch))

    async def _log_in_again(self, exc: UnknownToken) -> None:
        self.device_id = (await log_in_again(self.client, self.settings, exc)).device_id
        await self.keep_keys()

    async def keep_keys(self) -> None:
        """E2EE upkeep between syncs; a failure is logged and tried again after the next sync."""
        try:
            await self.client.keep_keys()
        except AdapterError as exc:
            logger.warning("matrix key maintenance failed: %s", exc)

    def _collect(self, event: RoomEvent) -> None:
        if event.kind != "invite" and not self.connection.ready.is_set():
            return  # the first sync brings room state only; an invite is the one thing in it to act on
        self._batch.append(event)
        if event.kind == "encrypted" and self.client.e2ee:
            # Kept until its room key arrives (`_on_room_key`); the oldest go first.
            self._undecrypted[event.event_id] = event
            while len(self._undecrypted) > MAX_UNDECRYPTED:
                self._undecrypted.popitem(last=False)

    def _on_room_key(self, key: RoomKey) -> None:
        """A room key arrived late (or another device sent it on our request): decrypt the events that waited for it and
        handle them with this sync's events."""
        for event_id, event in list(self._undecrypted.items()):
            if event.session_id != key.session_id or event.room_id != key.room_id:
                continue
            decrypted = self.client.decrypt(event)
            if decrypted is None:
                continue
            del self._undecrypted[event_id]
            self._batch.append(decrypted)

    async def _hand_over(self, items: MemoryObjectReceiveStream[RoomEvent | _Synced]) -> None:
        async for item in items:
            if isinstance(item, _Synced):
                save_sync_token(self.settings.store_path, self.device_id, item.token)
                if self._shared is not None:
                    await self._shared.set(self._token_key, item.token)
                continue
            try:
                await self.handle(item)
            except AdapterError as exc:
                logger.warning("matrix: could not handle %s: %s", item.event_id or "?", exc)
            except Exception:  # top-level handler: one bad event must not stop the bot
                logger.exception("matrix: failed to handle %s", item.event_id or "?")


async def _cancel_when(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()
