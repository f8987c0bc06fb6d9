"""The way out to chat: the chat port of each platform, and plain messages to a conversation.

Collaborators that only need to tell a conversation something get `say` (the `Say` protocol), never the host.
"""

from __future__ import annotations

import logging
from typing import Protocol

from bridge.cards.redacting_port import RedactingPort
from bridge.door.model import ConversationKey
from bridge.door.ports import ChatPort
from bridge.errors import AdapterError, BridgeError
from bridge.safety.redaction import Redactor

logger = logging.getLogger(__name__)


class Say(Protocol):
    async def __call__(self, conversation: ConversationKey, text: str) -> None: ...


class Outbound:
    def __init__(self, redactor: Redactor | None = None) -> None:
        self._ports: dict[str, ChatPort] = {}
        self._redactor = redactor or Redactor()

    def attach(self, port: ChatPort) -> None:
        # Configured secrets never reach chat, whatever part of the core (or server) the text came from.
        self._ports[port.platform] = RedactingPort(port, self._redactor) if self._redactor else port

    def port(self, platform: str) -> ChatPort | None:
        """The attached port of a platform, or None (an approver on a platform this bridge does not serve)."""
        return self._ports.get(platform)

    def port_for(self, conversation: ConversationKey) -> ChatPort:
        try:
            return self._ports[conversation.platform]
        except KeyError:
            raise AdapterError(f"no chat adapter for platform {conversation.platform!r}") from None

    async def say(self, conversation: ConversationKey, text: str) -> None:
        """Post a message; a platform failure is logged, not raised (the work it reports on goes on)."""
        try:
            await self.port_for(conversation).send(conversation, text)
        except BridgeError as exc:
            logger.warning("could not send a message to %s: %s", conversation.id(), exc)
