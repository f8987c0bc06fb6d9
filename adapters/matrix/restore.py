"""Cards this process did not post, found in the store: after a restart, those of durable (2026-era) requests that
outlived the last run, carried on; with several workers, those another worker posted, adopted by the worker that
syncs (when it becomes the sync leader, and when an answer points at one it does not know).

They are rebuilt from what the core stored with them (`cards.Card.ref_data`), so that votes, replies and reactions
find them again. Poll votes and reactions are counted again from the server (a reaction taken back before no longer
relates to the card, so it is not counted); typed answers were not kept, so after a restart the person is asked to
send them again once the core has picked the request up (an adopted form asks again for what is missing when sent).
"""

from __future__ import annotations

import logging

from adapters.matrix import render
from adapters.matrix.approval_thread import Asker
from adapters.matrix.cards import Card, FormParts, is_form, stored_events
from adapters.matrix.client import PLATFORM, MatrixClient
from adapters.matrix.formflow import FormFlow
from adapters.matrix.formstate import FormState
from adapters.matrix.index import CardIndex
from adapters.matrix.layout import plan
from adapters.matrix.markup import plain
from adapters.matrix.outbox import Connection
from adapters.matrix.settings import MatrixSettings
from adapters.matrix.translate import reaction_in, vote_in
from bridge.door.model import Actor
from bridge.door.ports import CardView, Inbound, look_up
from bridge.errors import AdapterError, BridgeError

logger = logging.getLogger(__name__)

RESTORE_WAIT = 60.0
"""How long a card restored after a restart waits for the core to pick its request up again."""
RESTORED = ("The bridge restarted. This request is still open; answers typed before the restart were not kept, so "
            "here are the questions again (poll votes still count).")
RESTORED_FORM = ("The bridge restarted. This form is still open: votes and reactions still count, but typed answers "
                 "were not kept, so please reply again with the lines for the typed questions of the card.")


class Restorer:
    def __init__(self, inbound: Inbound, client: MatrixClient, settings: MatrixSettings, connection: Connection,
                 index: CardIndex, asker: Asker, forms: FormFlow) -> None:
        self.inbound = inbound
        self.client = client
        self.settings = settings
        self.connection = connection
        self.index = index
        self.asker = asker
        self.forms = forms
        self._adopted: set[str] = set()
        """Cards indexed by `adopt`: their events were posted by another process (another worker, or a run before)."""

    async def restore(self) -> list[Card]:
        """Rebuild and index the cards the last run left open; carry each on with `carry_on`."""
        restored: list[Card] = []
        for stored in await self.inbound.cards(left_open_on=PLATFORM):
            card = _rebuilt(stored)
            if card is not None:
                self.index.add(card)
                restored.append(card)
        return restored

    async def adopt(self, interaction_id: str | None = None) -> Card | None:
        """Index the open durable cards in the store that this process does not know (another worker posted them,
        or took them over), with their votes and reactions counted from the server; `interaction_id`: only that
        one (an answer points at it), returned if it is open. Cards adopted earlier that are no longer open in the
        store are forgotten. A store or homeserver failure is logged: answers then find fewer cards, nothing
        else."""
        try:
            stored = await self.inbound.cards(left_open_on=PLATFORM)
        except BridgeError as exc:
            logger.warning("could not look up the open cards in the store: %s", exc)
            return None
        open_ids = {s.interaction.id for s in stored}
        for gone in self._adopted - open_ids:
            view = await look_up(self.inbound, gone)
            if view is None or not view.open:
                self.index.pop(gone)
        self._adopted &= open_ids
        found: Card | None = None
        for one in stored:
            if interaction_id is not None and one.interaction.id != interaction_id:
                continue
            card = self.index.card(one.interaction.id)
            if card is None:
                card = _rebuilt(one)
                if card is None:
                    continue
                self.index.add(card)
                self._adopted.add(card.interaction.id)
                if card.form is not None:
                    await self._recount(card)
            found = card
        return found

    async def carry_on(self, card: Card) -> None:
        # The core picks a stored request up only after its server session is back; until then a decision would be
        # refused as "being restored". Nothing signals that moment to a chat port, so wait for it a while.
        await self.connection.ready.wait()  # nio knows the rooms (needed to send) only after the first sync
        if card.form is not None:
            await self._recount(card)
        found = await look_up(self.inbound, card.interaction.id, wait=RESTORE_WAIT)
        if found is None or not found.open or card.done:
            return
        try:
            if card.form is not None:
                await self.asker.thread_post(card, render.message(plain(RESTORED_FORM), mark={
                    "interaction": card.interaction.id, "part": "restored"}))
                await self.forms.refresh(card)
            else:
                await self.asker.thread_post(card, render.message(plain(RESTORED), mark={
                    "interaction": card.interaction.id, "part": "restored"}))
                await self.asker.start(card, react=False)
        except BridgeError as exc:
            logger.warning("could not re-post card %s after the restart: %s", card.interaction.id, exc)

    async def _recount(self, card: Card) -> None:
        """Votes and reactions from before the restart, counted silently: their refusals were told back then."""
        form = card.form
        assert form is not None
        try:
            for poll_id, slot in form.polls.items():
                async for event in self.client.references(card.room_id, poll_id):
                    vote = vote_in(card.room_id, event.source)
                    if vote is not None and self._counts(card, vote.sender):
                        form.state.vote(slot, vote.timestamp, vote.answers)
            for target in (card.root, *form.lists):
                place = card.place_of(target)
                async for event in self.client.annotations(card.room_id, target):
                    reaction = reaction_in(card.room_id, event.source)
                    if reaction is None or place is None:
                        continue
                    if reaction.sender == self.client.user_id:
                        form.pill = form.pill or (target == card.root and reaction.key == render.ACCEPT)
                    elif self._counts(card, reaction.sender) and \
                            form.state.react(reaction.event_id, reaction.sender, place, reaction.key,
                                             event.timestamp) is not None:
                        self.index.own(card, reaction.event_id)
        except AdapterError as exc:
            # A failed recount is not fatal: later answers still count; earlier ones must be given again.
            logger.warning("could not recount the answers of card %s: %s", card.interaction.id, exc)

    def _counts(self, card: Card, sender: str) -> bool:
        """Whether an answer from before the restart counts. The core has not picked the request up yet (so it
        cannot be asked, and must not send notices for old answers): the interaction's own rule, plus the
        allow-list."""
        return self.settings.user_allowed(sender) and card.interaction.may_decide(Actor(PLATFORM, sender))


def _rebuilt(stored: CardView) -> Card | None:
    """A card's state rebuilt from its stored ref (answers not counted yet); None if the ref says too little."""
    i = stored.interaction
    if stored.card is None:
        return None
    data = stored.card.data
    if "root" not in data or "room" not in data:
        return None
    thread = data.get("thread") or data["root"]
    if not is_form(i):
        return Card.new(i, data["room"], data["root"], thread)
    layout = plan(i.form)
    parts = FormParts(layout, FormState(layout))
    for key, where in (("polls", parts.polls), ("lists", parts.lists)):
        for event_id, name in stored_events(stored.card, key).items():
            slot = layout.named(name)
            if slot is not None:
                where[event_id] = slot
    return Card(i, data["room"], data["root"], thread, form=parts, latest=data["root"])
