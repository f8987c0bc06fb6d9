"""The App Home tab: what waits for a person, with links to the cards.

Republished when the person opens the tab and whenever a card that names them is posted or finished, but at most
once per person every `REFRESH_INTERVAL` seconds: a burst of card events (200 cards for one on-call approver) is one
publish now and one more, of the newest state, when the interval is over. A publish reads the waiting requests when
it starts, so whatever changes after that schedules the next one. Each card's link is its stored permalink
(`permalinks.py`): a refresh makes exactly one Web API call, `views.publish`.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from adapters.slack import permalinks, render, translate
from adapters.slack.background import Background
from adapters.slack.client import SlackClients, api_errors
from bridge.door.model import CardRef, Interaction
from bridge.door.ports import Inbound
from bridge.errors import AdapterError

logger = logging.getLogger(__name__)

REFRESH_INTERVAL = 5.0
"""Least seconds between two publishes of one person's Home tab."""


class HomeTab:
    def __init__(self, inbound: Inbound, clients: SlackClients, background: Background,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._inbound = inbound
        self._clients = clients
        self._background = background
        self._clock = clock
        self.sleep: Callable[[float], Awaitable[None]] = anyio.sleep
        """How a publish waits for its person's interval to pass (tests make time pass on cue)."""
        self._last: dict[str, float] = {}
        """User id → when their latest publish started."""
        self._pending: set[str] = set()
        """People whose next publish is scheduled: more changes before it starts need nothing more."""
        self._publishing: dict[str, anyio.Lock] = {}
        """One publish per person at a time, so an older view never lands after a newer one."""

    def refresh(self, interaction: Interaction) -> None:
        """Republish (soon, in the background) the App Home of the Slack people an interaction names."""
        prefix = f"{translate.PLATFORM}:"
        for key in sorted(interaction.approvers):
            if key.startswith(prefix):
                self.request(key.removeprefix(prefix))

    def request(self, user_id: str) -> None:
        """Publish this person's Home tab now, or when their interval is over if it was published just now."""
        if user_id in self._pending:
            return
        delay = max(0.0, self._last.get(user_id, -math.inf) + REFRESH_INTERVAL - self._clock())
        self._pending.add(user_id)
        if not self._background.spawn(f"App Home of {user_id}", functools.partial(self._publish_after, user_id,
                                                                                   delay)):
            self._pending.discard(user_id)

    async def _publish_after(self, user_id: str, delay: float) -> None:
        try:
            if delay > 0:
                await self.sleep(delay)
        finally:
            # Started now, in the same step as leaving `_pending`: a request arriving while this publish waits for
            # its lock then waits for the next interval instead of publishing at once a second time.
            self._last[user_id] = self._clock()
            self._pending.discard(user_id)
        lock = self._publishing.setdefault(user_id, anyio.Lock())
        async with lock:
            await self.publish(user_id)

    async def on_opened(self, event: dict[str, Any]) -> None:
        if event.get("tab", "home") != "home":
            return
        self.request(str(event["user"]))

    async def publish(self, user_id: str) -> None:
        """Publish the tab as it is now (one `views.publish`; a failure is logged)."""
        waiting = await self._inbound.cards(waiting_for=translate.actor(user_id))
        try:
            workspace = await self._clients.workspace_url()
        except AdapterError as exc:
            logger.info("App Home without links to cards: %s", exc)
            workspace = ""
        items = [(found.interaction, self.link(found.interaction, found.card, workspace)) for found in waiting]
        try:
            async with api_errors("views.publish"):
                await self._clients.bot.views_publish(user_id=user_id, view=render.home(items))
        except AdapterError as exc:
            logger.warning("could not publish the App Home for %s: %s", user_id, exc)

    def link(self, interaction: Interaction, card: CardRef | None, workspace_url: str) -> str | None:
        if card is None:
            return None
        return permalinks.of_card(card.data, workspace_url, interaction.conversation.thread or None)
