"""What people write to the bot: mentions, direct messages, replies in the bot's threads, and the slash command.

Who may write is the allow-list's (`gate.py`), before any of this runs. Slack redelivers events and sends two
(`message` and `app_mention`) for one mention: `wanted` lets each message through once.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncBoltContext, AsyncRespond

from adapters.slack import render, translate
from adapters.slack.escape import mrkdwn
from adapters.slack.people import People
from adapters.slack.port import SlackPort
from adapters.slack.threads import BotThreads
from bridge.errors import AdapterError, PlatformAPIError
from bridge.model import ConversationKey, MessageIn
from bridge.ports import Inbound

logger = logging.getLogger(__name__)

JSON = dict[str, Any]
SEEN_MESSAGES = 1000
"""How many message ids are remembered to drop a redelivered or duplicate event for the same message."""


class SeenMessages:
    """The ids of the latest messages handled (`translate.message_identity`), oldest first."""

    def __init__(self, size: int = SEEN_MESSAGES) -> None:
        self._size = size
        self._seen: OrderedDict[str, None] = OrderedDict()

    def first_time(self, event: Mapping[str, Any]) -> bool:
        """False for a message already handled (Slack redelivers events, and may send two for one message)."""
        key = translate.message_identity(event)
        if key in self._seen:
            self._seen.move_to_end(key)
            return False
        self._seen[key] = None
        if len(self._seen) > self._size:
            self._seen.popitem(last=False)
        return True


def team_of(body: Mapping[str, Any], context: AsyncBoltContext) -> str:
    return str(body.get("team_id") or context.team_id or "")


class Intake:
    def __init__(self, inbound: Inbound, scope: translate.Scope, slash_command: str, people: People,
                 port: SlackPort, threads: BotThreads) -> None:
        self._inbound = inbound
        self._scope = scope
        self._slash_command = slash_command
        self._people = people
        self._port = port
        self._threads = threads
        self._seen = SeenMessages()

    async def wanted(self, event: Mapping[str, Any], team: str, bot: str) -> bool:
        """Whether a `message` or `app_mention` event is a person's new message to the bot: a mention, a direct
        message or a reply in one of the bot's threads, not seen before. Marks it seen."""
        if not translate.is_person_message(event, bot):
            return False
        if event.get("type") == "message" and event.get("channel_type") != "im":
            if bot and f"<@{bot}" in str(event.get("text", "")):
                return False  # the app_mention event for the same message handles it
            if not await self._threads.includes(team, str(event.get("channel", "")), str(event.get("thread_ts", ""))):
                return False
        return self._seen.first_time(event)

    async def on_message(self, event: JSON, body: JSON, context: AsyncBoltContext) -> None:
        """A `message` or `app_mention` event."""
        bot, team = str(context.bot_user_id or ""), team_of(body, context)
        if not await self.wanted(event, team, bot):
            return
        channel, user_id = str(event["channel"]), str(event["user"])
        message = translate.message_in(event, team, bot, self._scope, await self._people.actor(user_id),
                                       addressed=True)
        if message.conversation.thread:
            await self._threads.remember(team, channel, message.conversation.thread)
        await self._inbound.handle_message(message)

    async def on_command(self, ack: AsyncAck, respond: AsyncRespond, command: dict[str, str],
                         context: AsyncBoltContext) -> None:
        await ack()
        channel, user_id = command["channel_id"], command["user_id"]
        who = await self._people.actor(user_id, command.get("user_name", ""))
        text = command.get("text", "")
        team = command.get("team_id") or str(context.team_id or "")
        is_dm = channel.startswith("D")
        # A slash command leaves no message behind; an anchor shows the channel what was asked and, with
        # conversation_scope thread, is the root of the thread the answers go to.
        anchor = ConversationKey(translate.PLATFORM, team, channel)
        typed = mrkdwn(f"{self._slash_command} {text}".strip()).replace("`", "'")
        try:
            ts = await self._port.post(anchor, f"{render.mention(who)} ran `{typed}`", None)
        except AdapterError as exc:
            logger.warning("could not post in %s for %s: %s", channel, self._slash_command, exc)
            await self._tell_command_failed(respond, exc, str(context.bot_user_id or ""))
            return
        key = translate.conversation(self._scope, team, channel, ts, None, user_id, is_dm)
        if key.thread:
            await self._threads.remember(team, channel, key.thread)
        await self._inbound.handle_message(MessageIn(key, who, text, addressed=True, explicit_command=True))

    async def _tell_command_failed(self, respond: AsyncRespond, exc: AdapterError, bot: str) -> None:
        """Answer a slash command the bot could not act on, privately through its response_url (which works
        where the bot may not post)."""
        command = self._slash_command
        if isinstance(exc, PlatformAPIError) and exc.error in ("not_in_channel", "channel_not_found") and bot:
            text = (f"I am not in this channel, so I cannot answer here. Invite me first (`/invite <@{bot}>`), "
                    f"then run `{command}` again.")
        else:
            text = f"I could not post here ({mrkdwn(str(exc))}). Try `{command}` again in a moment."
        try:
            await respond(text=text, response_type="ephemeral")
        except Exception:
            logger.exception("could not answer %s through its response_url", command)
