"""After a restart: the cards of durable (2026-era) requests that outlived the last run, found and carried on.

They are rebuilt from what the core stored with them (`cards.Card.ref_data`), so that votes, replies and reactions
find them again. Poll votes are recounted from the server once synced; text answers given before the restart were
not kept, so the questions are asked again once the core has picked the request up.
"""

from __future__ import annotations

import logging

import anyio

from adapters.matrix import render
from adapters.matrix.asking import Asker
from adapters.matrix.cards import Card, Poll, poll_map
from adapters.matrix.client import PLATFORM, MatrixClient
from adapters.matrix.index import CardIndex
from adapters.matrix.outbox import Connection
from adapters.matrix.settings import MatrixSettings
from adapters.matrix.translate import vote_in
from bridge.errors import AdapterError, BridgeError
from bridge.model import Actor
from bridge.ports import Inbound

logger = logging.getLogger(__name__)

RESTORE_WAIT = 60.0
"""How long a card restored after a restart waits for the core to pick its request up again."""
RESTORED = ("The bridge restarted. This request is still open; answers typed before the restart were not kept, so "
            "here are the questions again (poll votes still count).")


class Restorer:
    def __init__(self, inbound: Inbound, client: MatrixClient, settings: MatrixSettings, connection: Connection,
                 index: CardIndex, asker: Asker) -> None:
        self.inbound = inbound
        self.client = client
        self.settings = settings
        self.connection = connection
        self.index = index
        self.asker = asker

    async def restore(self) -> list[Card]:
        """Rebuild and index the cards the last run left open; carry each on with `carry_on`."""
        restored: list[Card] = []
        for stored in await self.inbound.restorable_cards(PLATFORM):
            i = stored.interaction
            data = stored.card.data
            if "root" not in data or "room" not in data:
                continue
            card = Card.new(i, data["room"], data["root"], data.get("thread") or data["root"])
            for poll_id, name in poll_map(stored.card).items():
                try:
                    card.polls[poll_id] = Poll(poll_id, i.form.field(name))
                except KeyError:
                    continue
            self.index.add(card)
            restored.append(card)
        return restored

    async def carry_on(self, card: Card) -> None:
        # The core picks a stored request up only after its server session is back; until then a decision would be
        # refused as "being restored". Nothing signals that moment to a chat port, so wait for it a while.
        await self.connection.ready.wait()  # nio knows the rooms (needed to send) only after the first sync
        for poll in card.polls.values():
            await self._recount(card, poll)
        with anyio.move_on_after(RESTORE_WAIT):
            await self.inbound.wait_open(card.interaction.id)
        if self.inbound.open_interaction(card.interaction.id) is None or card.done:
            return
        try:
            await self.asker.thread_post(card, render.message(render.plain(RESTORED), mark={
                "interaction": card.interaction.id, "part": "restored"}))
            await self.asker.start(card, react=False)
        except BridgeError as exc:
            logger.warning("could not re-post card %s after the restart: %s", card.interaction.id, exc)

    async def _recount(self, card: Card, poll: Poll) -> None:
        try:
            async for event in self.client.references(card.room_id, poll.event_id):
                vote = vote_in(card.room_id, event.source)
                # Counted silently: these votes were cast before the restart, their refusals told back then.
                if vote is not None and self._counts(card, Actor(PLATFORM, vote.sender)):
                    card.vote(poll, vote.sender, vote.timestamp, render.poll_value(poll.field, vote.answers))
        except AdapterError as exc:
            # A failed recount is not fatal: later votes still count; earlier ones must be cast again.
            logger.warning("could not recount the votes of poll %s: %s", poll.event_id, exc)

    def _counts(self, card: Card, actor: Actor) -> bool:
        """Whether a vote from before the restart counts. The core has not picked the request up yet (so it cannot
        be asked, and must not send notices for old votes): the interaction's own rule, plus the allow-list."""
        return self.settings.user_allowed(actor.user_id) and card.interaction.may_decide(actor)
