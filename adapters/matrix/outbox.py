"""Sending into rooms: only once connected, and never in the clear into an unencrypted room when e2ee is required.

Matrix has no ephemeral messages, so every notice the bot sends on its own (refusals, hints, room warnings) is seen
by the whole room: `notice_limiter` keeps a person hammering a card from making the bot flood it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import anyio

from adapters.matrix.client import PLATFORM, MatrixClient
from adapters.matrix.markup import content_size
from adapters.matrix.render import CONTENT_LIMIT
from adapters.matrix.settings import MatrixSettings
from bridge.errors import PlatformAPIError
from bridge.safety.ratelimit import RateLimiter

NOTICE_INTERVAL = 30.0
"""The same notice goes to the same place at most once in this many seconds."""


def notice_limiter(clock: Callable[[], float] = time.monotonic) -> RateLimiter:
    return RateLimiter(1, window=NOTICE_INTERVAL, clock=clock)


class Connection:
    """Whether the adapter is logged in and caught up (set by the sync loop)."""

    def __init__(self) -> None:
        self.ready = anyio.Event()
        """Set once logged in and caught up: from then on new events are handled."""
        self.settled = anyio.Event()
        """Set when ready, or when `serve` ended without getting there: what waits for `ready` stops waiting."""
        self.failing = ""
        """Why the last sync failed, while syncing keeps failing (readiness); empty once a sync succeeds."""

    def up(self) -> None:
        self.ready.set()
        self.settled.set()

    def gave_up(self) -> None:
        self.settled.set()


class Outbox:
    def __init__(self, client: MatrixClient, settings: MatrixSettings, connection: Connection) -> None:
        self.client = client
        self.settings = settings
        self.connection = connection

    async def post(self, room_id: str, content: Mapping[str, Any], *, event_type: str = "m.room.message",
                   plain_ok: bool = False) -> str:
        """Send one event; its id. `plain_ok`: may go into an unencrypted room even with e2ee required (endings
        of cards posted there earlier, and the warning that the room is not encrypted)."""
        if not self.connection.ready.is_set():
            # The host may post before the first sync (it retires an earlier run's cards at start-up), but nio can
            # send only once it is logged in and knows the rooms.
            await self.connection.settled.wait()
            if not self.connection.ready.is_set():
                raise PlatformAPIError(PLATFORM, "room_send", "not connected to the homeserver")
        if self.settings.e2ee == "required" and not plain_ok and self.client.room_encrypted(room_id) is False:
            raise PlatformAPIError(PLATFORM, "room_send", "the room is not encrypted and e2ee is required")
        size = content_size(content)
        if size > CONTENT_LIMIT:
            # Rendering keeps every event under the limit; this is the last guard, clearer than the server's 413.
            raise PlatformAPIError(PLATFORM, "room_send", f"the event is too large ({size} bytes of content)")
        return await self.client.send(room_id, event_type, content)
