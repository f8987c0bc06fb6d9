"""Fill in on the web, from Matrix: a person reacts 🌐 to a form card (or replies `!web`), and their own one-time link
comes to them in a direct message.

Matrix has no message only one person in a room can see, and whoever holds a link answers as the person it was made
for, so the link never goes into the card's room: it goes into the bot's direct-message room with that person (the
one team approvals use, `MatrixAdapter.direct`). Who may ask is the core's call, made before this is reached
(`answers.Answers` asks `Inbound.check`, and the core tells someone who may not why, in the room).
"""

from __future__ import annotations

import html
import logging
from collections.abc import Awaitable, Callable

from adapters.matrix import render
from adapters.matrix.cards import Card
from adapters.matrix.client import PLATFORM
from adapters.matrix.formtext import WEB
from adapters.matrix.markup import Mention, Text, join_lines, plain
from adapters.matrix.outbox import Outbox
from bridge.door.model import Actor, AppOffer, ConversationKey
from bridge.door.ports import Inbound
from bridge.errors import AdapterError, PlatformAPIError

logger = logging.getLogger(__name__)

WEB_WORDS = ("!web", "web")
"""A reply asking for the link. `web` alone counts only once no typed question waits (it could be an answer)."""
NO_LINK = "This request cannot be filled in on the web now; answer it here."
NO_DM = "I could not open a direct message with you to send your link; answer here instead."

Direct = Callable[[str], Awaitable[ConversationKey | None]]
Notify = Callable[[ConversationKey, Actor, str], Awaitable[None]]


def link_message(card: Card, url: str) -> Text:
    """The direct message with the link: which request it answers, and that it is theirs alone."""
    safe = html.escape(url, quote=True)
    return join_lines([
        plain(f"{WEB} Your private link to fill this in on the web:"),
        Text(url, f'<a href="{safe}">{safe}</a>'),
        render.title(card.interaction),
        plain("It is for you only: it answers as you, works once, and expires with the request or sooner. "
              "Do not share it.")])


NO_APP_DM = "I could not open a direct message with you to send your link to the app."
APP_ENDED = "This app has ended; run the tool again to open it anew."
APP = "📱"
"""The reaction on an app's room message that asks for a link of one's own."""
MAX_APP_OFFERS = 500


def app_offer_text(offer: AppOffer, requester: Mention | None) -> Text:
    """What the room sees: that the result has an app, where the requester's link went, and how others get theirs.
    The link itself acts as one person, so it is never posted here."""
    head = plain(f"{APP} {offer.server.text()}.{offer.tool} has an app. ")
    if requester is not None:
        head = head + requester.as_text() + plain(": your own link is in our direct messages. Others: ")
    return head + plain(f"react {APP} to this message and yours comes to you in a direct message.")


def app_link_message(offer: AppOffer, url: str) -> Text:
    """The direct message with a link to an app: whose app, and that the link is theirs alone."""
    safe = html.escape(url, quote=True)
    return join_lines([
        plain(f"📱 Your private link to the app of {offer.server.text()}.{offer.tool}:"),
        Text(url, f'<a href="{safe}">{safe}</a>'),
        plain("It is for you only: the app acts as you, the link works in one browser, and it expires. "
              "Do not share it.")])


class WebLinks:
    def __init__(self, inbound: Inbound, outbox: Outbox, direct: Direct, notify: Notify) -> None:
        self._inbound = inbound
        self._outbox = outbox
        self._direct = direct
        self._notify = notify

    def enabled(self) -> bool:
        return self._inbound.web_forms_enabled()

    async def send(self, card: Card, actor: Actor) -> None:
        """Send `actor` (who may answer `card`: checked before) their link in a direct message."""
        conversation = card.interaction.conversation
        url = (await self._inbound.check(card.interaction.id, actor, web_link=True)).web_link
        if not url:
            await self._notify(conversation, actor, NO_LINK)
            return
        try:
            dm = await self._direct(actor.user_id)
            if dm is None:
                raise PlatformAPIError(PLATFORM, "createRoom", f"no direct message room with {actor.user_id}")
            await self._outbox.post(dm.channel, render.message(link_message(card, url), msgtype="m.text",
                                                               mentions=[actor.user_id]))
        except AdapterError as exc:
            logger.warning("could not send %s their web link for %s: %s", actor.user_id, card.interaction.id, exc)
            await self._notify(conversation, actor, NO_DM)
