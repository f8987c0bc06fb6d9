"""What people write to the bot: mentions, direct messages, replies in the bot's threads, and the slash command.

Who may write is the allow-list's (`gate.py`), before any of this runs. Slack redelivers events and sends two
(`message` and `app_mention`) for one mention: `wanted` lets each message through once. Everything after the ack
(looking the person up, posting, handing the message to the core) runs in the adapter's background.

Slack escapes `&`, `<` and `>` in slash-command text as it does in messages; both are unescaped before the core
parses them. A slash command is private, so the line it posts to start its thread shows the channel only the
command and the server and tool it names; the whole command line is shown to the person who ran it alone.
"""

from __future__ import annotations

import functools
import logging
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncBoltContext, AsyncRespond

from adapters.slack import render, translate
from adapters.slack.background import Background
from adapters.slack.escape import mrkdwn
from adapters.slack.people import People
from adapters.slack.port import SlackPort
from adapters.slack.threads import BotThreads
from bridge.door.model import ConversationKey, MessageIn
from bridge.door.ports import Inbound
from bridge.errors import AdapterError, PlatformAPIError

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
                 port: SlackPort, threads: BotThreads, background: Background) -> None:
        self._inbound = inbound
        self._background = background
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
        """A `message` or `app_mention` event (bolt has acked it already)."""
        bot, team = str(context.bot_user_id or ""), team_of(body, context)
        if await self.wanted(event, team, bot):
            self._background.spawn(f"message {translate.message_identity(event)}",
                                   functools.partial(self._handle_message, event, team, bot))

    async def _handle_message(self, event: JSON, team: str, bot: str) -> None:
        channel, user_id = str(event["channel"]), str(event["user"])
        message = translate.message_in(event, team, bot, self._scope, await self._people.actor(user_id),
                                       addressed=True)
        if message.conversation.thread:
            await self._threads.remember(team, channel, message.conversation.thread)
        await self._inbound.handle_message(message)

    async def on_command(self, ack: AsyncAck, respond: AsyncRespond, command: dict[str, str],
                         context: AsyncBoltContext) -> None:
        await ack()
        self._port.response_urls.remember(command.get("channel_id", ""), command.get("user_id", ""),
                                          command.get("response_url"))
        team = command.get("team_id") or str(context.team_id or "")
        self._background.spawn(f"{self._slash_command} by {command.get('user_id')}", functools.partial(
            self._run_command, respond, command, team, str(context.bot_user_id or "")))

    async def _run_command(self, respond: AsyncRespond, command: dict[str, str], team: str, bot: str) -> None:
        channel, user_id = command["channel_id"], command["user_id"]
        who = await self._people.actor(user_id, command.get("user_name", ""))
        text = translate.unescape(command.get("text", ""))
        is_dm = channel.startswith("D")
        # A slash command leaves no message behind; an anchor shows the channel what was asked (not the arguments,
        # which the person typed privately) and, with conversation_scope thread, is the root of the thread the
        # answers go to.
        anchor = ConversationKey(translate.PLATFORM, team, channel)
        shown, hidden = translate.public_command(text)
        public = _code(f"{self._slash_command} {shown}".strip())
        line = f"{render.mention(who)} ran {public}" + (" (the rest of the command is shown only to them)"
                                                        if hidden else "")
        try:
            ts = await self._port.post(anchor, line, None)
        except AdapterError as exc:
            logger.warning("could not post in %s for %s: %s", channel, self._slash_command, exc)
            await self._tell_command_failed(respond, exc, bot)
            return
        key = translate.conversation(self._scope, team, channel, ts, None, user_id, is_dm)
        if key.thread:
            await self._threads.remember(team, channel, key.thread)
        if hidden:
            whole = " ".join(f"{self._slash_command} {text}".split()).replace("`", "'")
            self._background.spawn(f"command line for {user_id}", functools.partial(
                self._port.tell, channel, user_id, f"You ran `{whole}`", key.thread or None))
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


def _code(text: str) -> str:
    """Typed text as inline code in mrkdwn: escaped, on one line, without backticks that would end the code span."""
    return "`" + mrkdwn(" ".join(text.split())).replace("`", "'") + "`"
