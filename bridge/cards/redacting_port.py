"""A chat port that redacts configured secrets from everything the core posts through it (`bridge.safety.redaction`).

The core's one way out to chat is `Outbound`, which wraps each attached port in this when the config has secrets:
messages, private notices, status lines and cards (the server's message, details and link) pass through the
redactor, so a server that echoes a token it was given, or prints it to its stderr, does not post it to a channel.
An unchanged card is passed on as the very same object.
"""

from __future__ import annotations

from dataclasses import replace

from bridge.door.model import (
    Actor,
    AppOffer,
    CardRef,
    ConversationKey,
    Interaction,
    MessageRef,
    Outcome,
    StatusView,
)
from bridge.door.ports import ChatPort
from bridge.safety.redaction import Redactor


class RedactingPort:
    def __init__(self, port: ChatPort, redactor: Redactor) -> None:
        self.inner = port
        self.platform = port.platform
        self.private_cards = port.private_cards
        self._redactor = redactor

    def _card(self, interaction: Interaction) -> Interaction:
        r = self._redactor.redact
        details = tuple(replace(d, text=r(d.text), label=r(d.label)) for d in interaction.details)
        message, url = r(interaction.message), r(interaction.url)
        if message == interaction.message and url == interaction.url and details == interaction.details:
            return interaction
        return replace(interaction, message=message, url=url, details=details)

    async def post_card(self, interaction: Interaction) -> CardRef:
        return await self.inner.post_card(self._card(interaction))

    async def finish_card(self, ref: CardRef, interaction: Interaction, outcome: Outcome) -> None:
        reason = self._redactor.redact(outcome.reason)
        outcome = outcome if reason == outcome.reason else replace(outcome, reason=reason)
        await self.inner.finish_card(ref, self._card(interaction), outcome)

    async def update_card(self, ref: CardRef, interaction: Interaction) -> None:
        await self.inner.update_card(ref, self._card(interaction))

    async def direct(self, user_id: str) -> ConversationKey | None:
        return await self.inner.direct(user_id)

    async def members(self, conversation: ConversationKey) -> frozenset[str] | None:
        return await self.inner.members(conversation)

    async def group_members(self, group: str) -> frozenset[str]:
        return await self.inner.group_members(group)

    async def send(self, conversation: ConversationKey, text: str) -> MessageRef:
        return await self.inner.send(conversation, self._redactor.redact(text))

    async def notify(self, conversation: ConversationKey, actor: Actor, text: str) -> None:
        await self.inner.notify(conversation, actor, self._redactor.redact(text))

    async def offer_app(self, conversation: ConversationKey, offer: AppOffer) -> None:
        await self.inner.offer_app(conversation, offer)

    async def post_status(self, conversation: ConversationKey, status: StatusView) -> MessageRef:
        return await self.inner.post_status(conversation, self._status(status))

    async def update_status(self, ref: MessageRef, status: StatusView) -> None:
        await self.inner.update_status(ref, self._status(status))

    def _status(self, status: StatusView) -> StatusView:
        text = self._redactor.redact(status.text)
        return status if text == status.text else replace(status, text=text)
