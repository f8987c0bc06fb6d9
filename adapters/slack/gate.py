"""The allow-list (`allowed_channels`, `allowed_users`) as one bolt global middleware, run before any listener.

A refused request is acked here and goes no further; the person is told privately, in the background, so the ack
is never late. What is refused, and how:
- a person's message to the bot (`wanted`: a mention, a DM, a reply in the bot's thread) in a channel not allowed is
  ignored; from a person not allowed it gets a private refusal. Other messages there are dropped quietly;
- the slash command from a person or channel not allowed is answered with the refusal as its ack;
- a button click by a person not allowed is acked and refused privately, except link buttons (they only open a page).
Modal submissions, select options and App Home pass: only allowed people can open a modal, and the core decides
who may answer a request.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncBoltContext
from slack_bolt.request.payload_utils import is_slash_command
from slack_bolt.response import BoltResponse

from adapters.slack import ids
from adapters.slack.background import Background
from adapters.slack.responses import ResponseUrls, channel_of
from adapters.slack.settings import SlackSettings

logger = logging.getLogger(__name__)

NOT_ALLOWED = "You are not allowed to use this bridge here."
MESSAGE_EVENTS = frozenset({"message", "app_mention"})
OPEN_TO_ALL = frozenset({ids.OPEN_URL})
"""Buttons anyone may click: they only open a link."""

Wanted = Callable[[Mapping[str, Any], str, str], Awaitable[bool]]
"""(event, team, bot user id) → whether the event is a person's new message to the bot (`Intake.wanted`)."""
Tell = Callable[[str, str, str, str | None], Awaitable[None]]
"""(channel, user, text, thread) → tell one person privately (`SlackPort.tell`)."""


class AllowList:
    def __init__(self, settings: SlackSettings, wanted: Wanted, tell: Tell, background: Background,
                 response_urls: ResponseUrls) -> None:
        self._settings = settings
        self._wanted = wanted
        self._tell = tell
        self._background = background
        self._response_urls = response_urls

    async def middleware(self, body: dict[str, Any], context: AsyncBoltContext, ack: AsyncAck,
                         next_: Callable[[], Awaitable[None]]) -> BoltResponse | None:
        """Bolt global middleware (`app.use`): call `next_` to let the request through, or return the ack."""
        if body.get("type") == "event_callback":
            event = body.get("event") or {}
            if event.get("type") in MESSAGE_EVENTS and not await self._message_allowed(body, event, context):
                return BoltResponse(status=200, body="")
        elif is_slash_command(body):
            if not (self._settings.channel_allowed(str(body.get("channel_id", "")))
                    and self._settings.user_allowed(str(body.get("user_id", "")))):
                return await ack(NOT_ALLOWED)
        elif body.get("type") == "block_actions":
            user_id = str((body.get("user") or {}).get("id", ""))
            clicked = {str(a.get("action_id", "")) for a in body.get("actions") or ()}
            if not self._settings.user_allowed(user_id) and not clicked <= OPEN_TO_ALL:
                response = await ack()
                channel = channel_of(body)
                if channel:
                    # The click's response_url reaches them where an ephemeral message cannot (a channel they
                    # preview without joining).
                    self._response_urls.remember(channel, user_id, body.get("response_url"))
                    self._refuse(channel, user_id, None)
                return response
        await next_()
        return None

    async def _message_allowed(self, body: Mapping[str, Any], event: Mapping[str, Any],
                               context: AsyncBoltContext) -> bool:
        channel, user_id = str(event.get("channel", "")), str(event.get("user", ""))
        channel_ok = self._settings.channel_allowed(channel)
        if channel_ok and self._settings.user_allowed(user_id):
            return True
        team = str(body.get("team_id") or context.team_id or "")
        if await self._wanted(event, team, str(context.bot_user_id or "")):
            if not channel_ok:
                logger.info("ignoring a message in %s (not in allowed_channels)", channel)
            else:
                thread = event.get("thread_ts")
                self._refuse(channel, user_id, str(thread) if thread else None)
        return False

    def _refuse(self, channel: str, user_id: str, thread: str | None) -> None:
        """Tell a person privately they may not use the bridge, after the ack (the background outlives it)."""
        work = functools.partial(self._tell, channel, user_id, NOT_ALLOWED, thread)
        if not self._background.spawn(f"refusal for {user_id}", work):
            logger.warning("not serving: %s was not told they are not allowed", user_id)
