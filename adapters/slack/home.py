"""The App Home tab: what waits for a person, with links to the cards, published when they open it and again,
in the background, whenever a card that names them is posted or finished."""

from __future__ import annotations

import functools
import logging
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack import render, translate
from adapters.slack.background import Background
from adapters.slack.client import api_errors
from bridge.errors import AdapterError
from bridge.model import CardRef, Interaction
from bridge.ports import Inbound

logger = logging.getLogger(__name__)


class HomeTab:
    def __init__(self, inbound: Inbound, client: AsyncWebClient, background: Background) -> None:
        self._inbound = inbound
        self._client = client
        self._background = background

    def refresh(self, interaction: Interaction) -> None:
        """Republish the App Home of the Slack people an interaction names (in the background, best effort)."""
        prefix = f"{translate.PLATFORM}:"
        for key in sorted(interaction.approvers):
            if key.startswith(prefix):
                user_id = key.removeprefix(prefix)
                self._background.spawn(f"App Home of {user_id}", functools.partial(self.publish, user_id))

    async def on_opened(self, event: dict[str, Any]) -> None:
        if event.get("tab", "home") != "home":
            return
        await self.publish(str(event["user"]))

    async def publish(self, user_id: str) -> None:
        items: list[tuple[Interaction, str | None]] = []
        for interaction, card in self._inbound.waiting_for(translate.actor(user_id)):
            items.append((interaction, await self._permalink(card)))
        try:
            async with api_errors("views.publish"):
                await self._client.views_publish(user_id=user_id, view=render.home(items))
        except AdapterError as exc:
            logger.warning("could not publish the App Home for %s: %s", user_id, exc)

    async def _permalink(self, card: CardRef | None) -> str | None:
        if card is None or "channel" not in card.data:
            return None
        try:
            async with api_errors("chat.getPermalink"):
                response = await self._client.chat_getPermalink(channel=card.data["channel"],
                                                                message_ts=card.data["ts"])
        except AdapterError as exc:
            logger.info("no permalink for card %s: %s", card.interaction_id, exc)
            return None
        return str(response["permalink"])
