"""Bringing a card and its private copies to a new state through the chat ports, and private notices: every call
bounded by `CLEANUP_TIMEOUT`, a platform failure logged and never raised (the decision stands either way)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace

import anyio

from bridge.cards.recipients import Copy
from bridge.door.model import Actor, CardRef, ConversationKey, Interaction, Outcome
from bridge.door.ports import CLEANUP_TIMEOUT, ChatPort
from bridge.errors import AdapterError

logger = logging.getLogger(__name__)


def as_copy(interaction: Interaction, copy: Copy) -> Interaction:
    """A private copy as it shows now: with the approvals counted on the card."""
    return replace(copy.interaction, approvals=interaction.approvals)


class CardUpdates:
    def __init__(self, port_for: Callable[[ConversationKey], ChatPort]) -> None:
        self._port_for = port_for

    async def finish(self, interaction: Interaction, card: CardRef | None, copies: Sequence[Copy],
                     outcome: Outcome) -> bool:
        """The card and its copies in their final state (shielded: also while the bridge stops). Whether the card
        shows it now (False: the platform failed, or took too long)."""
        shown = card is None
        with anyio.move_on_after(CLEANUP_TIMEOUT, shield=True):
            if card is not None:
                try:
                    await self._port_for(interaction.conversation).finish_card(card, interaction, outcome)
                    shown = True
                except AdapterError as exc:
                    logger.warning("could not finish card %s: %s", interaction.id, exc)
            for copy in copies:
                try:
                    await copy.port.finish_card(copy.card, as_copy(interaction, copy), outcome)
                except AdapterError as exc:
                    logger.warning("could not finish the private copy %s: %s", copy.interaction.id, exc)
        return shown

    async def progress(self, interaction: Interaction, card: CardRef | None, copies: Sequence[Copy]) -> None:
        """Show the approvals so far on the card and its private copies (not shielded: the card may end meanwhile)."""
        with anyio.move_on_after(CLEANUP_TIMEOUT):
            targets = [(self._port_for(interaction.conversation), card, interaction)] if card is not None else []
            targets += [(c.port, c.card, as_copy(interaction, c)) for c in copies]
            for port, ref, shown in targets:
                try:
                    await port.update_card(ref, shown)
                except AdapterError as exc:
                    logger.warning("could not show the progress of %s: %s", shown.id, exc)

    async def notify(self, conversation: ConversationKey, actor: Actor, text: str) -> None:
        with anyio.move_on_after(CLEANUP_TIMEOUT, shield=True):
            try:
                await self._port_for(conversation).notify(conversation, actor, text)
            except AdapterError as exc:
                logger.warning("could not send a notice: %s", exc)
