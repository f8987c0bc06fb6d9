"""Who a Slack user id is: display names for the core's texts, looked up with `users.info` and cached for a while.

One lookup per person at a time: clicks arriving together from someone not yet known wait on the same call. Names
expire (`NAME_TTL`), so a renamed person is seen under their new name; a failed lookup falls back to the name the
payload carried and is tried again sooner (`FAILED_TTL`). The bot's own user id is not looked up here: it comes
with bolt's authorization (`SlackClients.authorize`, one shared `auth.test`) in each request's `context`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack import translate
from adapters.slack.client import api_errors
from adapters.slack.inflight import SharedLookups
from bridge.door.model import Actor
from bridge.errors import AdapterError

logger = logging.getLogger(__name__)

NAME_TTL = 3600.0
"""Seconds a looked-up name is used before it is asked again."""
FAILED_TTL = 300.0
"""Seconds the payload's name stands in after a failed lookup."""
MAX_NAMES = 50_000
"""Expired names are dropped once this many are cached (a workspace's people, with room to spare)."""

Clock = Callable[[], float]


class People:
    def __init__(self, client: AsyncWebClient, clock: Clock = time.monotonic) -> None:
        self._client = client
        self._clock = clock
        self._names: dict[str, tuple[str, float]] = {}
        """User id → (display name, when it expires)."""
        self._lookups = SharedLookups[str, str | None]()

    def _known(self, user_id: str) -> str | None:
        entry = self._names.get(user_id)
        if entry is None or entry[1] <= self._clock():
            return None
        return entry[0]

    async def actor(self, user_id: str, hint: str = "") -> Actor:
        """The person behind a user id, with their display name (cached; `hint` when Slack cannot say)."""
        name = self._known(user_id)
        if name is None:
            found = await self._lookups.get(user_id, lambda: self._look_up(user_id, hint))
            name = found if found is not None else hint
        return translate.actor(user_id, name)

    async def _look_up(self, user_id: str, hint: str) -> str | None:
        """The person's name from Slack (remembered), or None; after a failure `hint` stands in for a while."""
        try:
            async with api_errors("users.info"):
                user = (await self._client.users_info(user=user_id))["user"]
        except AdapterError as exc:
            logger.debug("no name for %s: %s", user_id, exc)
            self._remember(user_id, hint, FAILED_TTL)
            return None
        profile = user.get("profile") or {}
        name = str(profile.get("display_name") or profile.get("real_name") or user.get("real_name") or "")
        self._remember(user_id, name or hint, NAME_TTL if name else FAILED_TTL)
        return name or None

    def _remember(self, user_id: str, name: str, ttl: float) -> None:
        now = self._clock()
        if len(self._names) >= MAX_NAMES:
            self._names = {k: v for k, v in self._names.items() if v[1] > now}
        self._names[user_id] = (name, now + ttl)

    async def of(self, user: Mapping[str, Any]) -> Actor:
        """The person a payload's `user` object names (`{"id": …, "name": …}`)."""
        return await self.actor(str(user.get("id", "")), str(user.get("name") or ""))

    def cached(self, user: Mapping[str, Any]) -> Actor:
        """For answers due within 3 seconds (modal submissions): no lookup, the cached or the payload's name."""
        user_id = str(user.get("id", ""))
        return translate.actor(user_id, self._known(user_id) or str(user.get("name") or ""))
