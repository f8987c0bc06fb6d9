"""Who is where on Slack, for the core's approver routing: channel members, user groups and direct messages.

Each answer is cached for a short while (members and groups change rarely, and a card may ask about several
people); a DM channel is cached for good (Slack returns the same one every time). Failures become bridge errors
in `api_errors`; the core logs them and carries on.
"""

from __future__ import annotations

import time

from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack import translate
from adapters.slack.client import api_errors
from bridge.door.model import ConversationKey

CACHE_SECONDS = 300.0
MAX_MEMBERS = 5000
"""Members read of one channel: a larger channel is taken to include everyone (nobody is asked privately)."""


class Directory:
    def __init__(self, client: AsyncWebClient) -> None:
        self._client = client
        self._members: dict[str, tuple[float, frozenset[str] | None]] = {}
        self._groups: dict[str, tuple[float, frozenset[str]]] = {}
        self._dms: dict[str, str] = {}

    async def members(self, conversation: ConversationKey) -> frozenset[str] | None:
        cached = self._members.get(conversation.channel)
        if cached is not None and time.monotonic() - cached[0] < CACHE_SECONDS:
            return cached[1]
        found: set[str] = set()
        cursor = ""
        while True:
            async with api_errors("conversations.members"):
                page = await self._client.conversations_members(channel=conversation.channel, cursor=cursor or None,
                                                                limit=200)
            found.update(str(u) for u in page.get("members") or ())
            cursor = str((page.get("response_metadata") or {}).get("next_cursor") or "")
            if not cursor or len(found) >= MAX_MEMBERS:
                break
        members = None if cursor else frozenset(found)
        self._members[conversation.channel] = (time.monotonic(), members)
        return members

    async def group_members(self, group: str) -> frozenset[str]:
        cached = self._groups.get(group)
        if cached is not None and time.monotonic() - cached[0] < CACHE_SECONDS:
            return cached[1]
        async with api_errors("usergroups.users.list"):
            response = await self._client.usergroups_users_list(usergroup=group)
        users = frozenset(str(u) for u in response.get("users") or ())
        self._groups[group] = (time.monotonic(), users)
        return users

    async def direct(self, user_id: str) -> ConversationKey:
        channel = self._dms.get(user_id)
        if channel is None:
            async with api_errors("conversations.open"):
                response = await self._client.conversations_open(users=user_id)
            channel = self._dms[user_id] = str(response["channel"]["id"])
        return ConversationKey(translate.PLATFORM, "", channel)
