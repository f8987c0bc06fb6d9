"""Who a Slack user id is: display names for the core's texts, looked up once with `users.info` and cached.

Best effort: a failed lookup falls back to the name the payload carried. The bot's own user id is not looked up
here: bolt's authorization calls `auth.test` once and puts it in each request's context (`bot_user_id`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack import translate
from adapters.slack.client import api_errors
from bridge.errors import AdapterError
from bridge.model import Actor

logger = logging.getLogger(__name__)


class People:
    def __init__(self, client: AsyncWebClient) -> None:
        self._client = client
        self._names: dict[str, str] = {}

    async def actor(self, user_id: str, hint: str = "") -> Actor:
        """The person behind a user id, with their display name (cached; `hint` when Slack cannot say)."""
        name = self._names.get(user_id)
        if name is None:
            try:
                async with api_errors("users.info"):
                    user = (await self._client.users_info(user=user_id))["user"]
                profile = user.get("profile") or {}
                name = profile.get("display_name") or profile.get("real_name") or user.get("real_name") or hint
            except AdapterError as exc:
                logger.debug("no name for %s: %s", user_id, exc)
                name = hint
            self._names[user_id] = name = str(name or "")
        return translate.actor(user_id, name)

    async def of(self, user: Mapping[str, Any]) -> Actor:
        """The person a payload's `user` object names (`{"id": …, "name": …}`)."""
        return await self.actor(str(user.get("id", "")), str(user.get("name") or ""))

    def cached(self, user: Mapping[str, Any]) -> Actor:
        """For answers due within 3 seconds (modal submissions): no lookup, the cached or the payload's name."""
        user_id = str(user.get("id", ""))
        return translate.actor(user_id, self._names.get(user_id) or str(user.get("name") or ""))
