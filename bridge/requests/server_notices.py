"""What MCP servers tell the bridge without asking: tool-list changes, finished link flows, log lines.

`SessionNotices` is bound to one session (notifications carry no request context, only the session they came on).
Log lines are filtered by level (servers that ignore logging/setLevel still get filtered here) and rate-limited per
server and conversation, so a chatty server cannot flood a channel.
"""

from __future__ import annotations

import logging
from typing import Any

from mcp.types import ElicitCompleteNotification, LoggingMessageNotificationParams, ToolListChangedNotification

from bridge.cards.broker import Broker
from bridge.cards.chat import Outbound
from bridge.door.model import Outcome, Status
from bridge.errors import BridgeError
from bridge.safety.ratelimit import RateLimiter
from bridge.servers.mcp_session import Session
from bridge.storage.api import CardStore
from bridge.text.plain import shorten

logger = logging.getLogger(__name__)

LOG_MESSAGES_PER_MINUTE = 10
"""Server log lines shown per server and conversation per minute; more are dropped."""
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
LINK_DONE = "the server reports the link flow complete"


class ServerNotices:
    def __init__(self, broker: Broker, store: CardStore, outbound: Outbound) -> None:
        self._broker = broker
        self._store = store
        self._outbound = outbound
        self._log_limit = RateLimiter(LOG_MESSAGES_PER_MINUTE)

    def for_session(self, session: Session) -> SessionNotices:
        return SessionNotices(self, session)

    async def link_done(self, interaction_id: str) -> None:
        """A legacy server says the link flow is done: an open card is accepted by that, a decided one updated."""
        if self._broker.complete(interaction_id, LINK_DONE):
            return
        stored = await self._store.interaction(interaction_id)
        if stored is None or stored.card is None:
            return
        previous = stored.outcome or Outcome(Status.ACCEPTED)
        done = Outcome(previous.status, previous.content, previous.by, reason=LINK_DONE)
        try:
            await self._outbound.port_for(stored.interaction.conversation).finish_card(stored.card,
                                                                                      stored.interaction, done)
        except BridgeError as exc:
            logger.warning("could not update card %s: %s", interaction_id, exc)

    async def log(self, session: Session, params: LoggingMessageNotificationParams) -> None:
        level = session.server.log_level
        if level == "off" or LOG_LEVELS.index(params.level) < LOG_LEVELS.index(level):
            return
        info = session.context_for_request()
        conversation = info.conversation if info else session.conversation
        if conversation is None or not self._log_limit.allow((conversation, session.server.name)):
            return
        data = params.data if isinstance(params.data, str) else repr(params.data)
        source = f"{params.logger}: " if params.logger else ""
        await self._outbound.say(conversation, f"[{session.server.name} {params.level}] {source}{shorten(data, 500)}")


class SessionNotices:
    """The message and logging handlers of one session."""

    def __init__(self, notices: ServerNotices, session: Session) -> None:
        self._notices = notices
        self._session = session

    async def on_message(self, message: Any) -> None:
        session = self._session
        if isinstance(message, ToolListChangedNotification):
            session.tools = None  # fetched again on next need, so approval rules see the new annotations
        elif isinstance(message, ElicitCompleteNotification):
            # Ids are the server's and only mean something on this session.
            interaction_id = session.url_elicitations.pop(message.params.elicitation_id, None)
            if interaction_id is not None:  # unknown or already completed: the spec says to ignore it
                await self._notices.link_done(interaction_id)

    async def on_log(self, params: LoggingMessageNotificationParams) -> None:
        await self._notices.log(self._session, params)
