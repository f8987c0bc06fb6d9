"""The chat port for Matrix (`bridge.door.ports.ChatPort`): cards, plain messages, notices and status lines.

A form card is posted by `formflow`; an approval or link card is one message answered with reactions on itself.
Either way its state (`cards.Card`) goes into the card index, so that answers find it, and everything needed to find
it again after a restart goes into its `CardRef`. When a card ends it is remembered (`ended`) for a while, so that a
late answer gets a notice instead of silence.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import anyio

from adapters.matrix import render
from adapters.matrix.approval_thread import Asker
from adapters.matrix.cards import Card, is_form
from adapters.matrix.client import PLATFORM
from adapters.matrix.ended import Ended
from adapters.matrix.formflow import FormFlow, waits_for
from adapters.matrix.index import CardIndex
from adapters.matrix.markup import Mention, fit
from adapters.matrix.outbox import Outbox, notice_limiter
from bridge.door.model import Actor, CardRef, ConversationKey, Interaction, MessageRef, Outcome, Status, StatusView
from bridge.door.ports import CLEANUP_TIMEOUT, Inbound
from bridge.errors import AdapterError

logger = logging.getLogger(__name__)


class MatrixPort:
    platform = PLATFORM
    private_cards = False  # Matrix cannot show one person a message in a room: private cards go to a DM

    def __init__(self, inbound: Inbound, outbox: Outbox, index: CardIndex, asker: Asker) -> None:
        self.outbox = outbox
        self.cards = index
        self.asker = asker
        self.notices = notice_limiter()
        self.ended = Ended()
        self.forms = FormFlow(inbound, outbox, index, self.notify)

    async def post_card(self, interaction: Interaction) -> CardRef:
        people = waits_for(interaction)
        posted: list[Card] = []
        try:
            if is_form(interaction):
                card = await self.forms.post(interaction, people, posted.append)
            else:
                card = await self._post_approval(interaction, people, posted.append)
        except BaseException as exc:
            # Half posted: the core will not finish a card it never got a ref for, so end it here (forgotten,
            # polls ended, card edited), or it would stay open and first in its thread, taking later replies.
            if posted:
                reason = f"the card could not be posted: {exc}" if isinstance(exc, AdapterError) else \
                    "the card could not be posted"
                with anyio.move_on_after(CLEANUP_TIMEOUT, shield=True):
                    try:
                        await self.finish_card(CardRef(interaction.id, posted[0].ref_data()), interaction,
                                               Outcome(Status.FAILED, reason=reason))
                    except AdapterError as cleanup:
                        logger.warning("could not end the half-posted card %s: %s", interaction.id, cleanup)
            raise
        self.ended.forget_thread(card.room_id, card.thread)
        return CardRef(interaction.id, card.ref_data())

    async def _post_approval(self, interaction: Interaction, people: list[Mention],
                             on_root: Callable[[Card], None]) -> Card:
        conversation = interaction.conversation
        room_id = conversation.channel
        thread = conversation.thread or None
        text = render.card(interaction, people, now=time.time())
        root = await self.outbox.post(room_id, render.message(
            text, msgtype="m.text", thread=thread, mentions=[p.user_id for p in people],
            mark={"interaction": interaction.id, "part": "card"}))
        card = Card.new(interaction, room_id, root, thread or root)
        self.cards.add(card)
        on_root(card)
        await self.asker.start(card)
        return card

    async def update_card(self, ref: CardRef, interaction: Interaction) -> None:
        """The card's first message edited to show its progress (approvals so far, who still may). Only approvals
        gather several decisions, and they are answered on the card itself."""
        if is_form(interaction) or "root" not in ref.data:
            return
        text = render.card(interaction, waits_for(interaction), now=time.time())
        room_id = ref.data.get("room", interaction.conversation.channel)
        await self.outbox.post(room_id, render.edit(ref.data["root"], render.message(text, msgtype="m.text")))

    async def finish_card(self, ref: CardRef, interaction: Interaction, outcome: Outcome) -> None:
        card = self.cards.pop(interaction.id)
        if card is not None:
            self.ended.add(card, outcome)
        if is_form(interaction):
            await self.forms.finish(ref, interaction, outcome, card)
            return
        room_id = ref.data.get("room", interaction.conversation.channel)
        root = ref.data.get("root")
        if root:
            content = dict(outcome.content) if outcome.content else None
            finished = render.message(render.finished(interaction, outcome,
                                                      render.content_lines(interaction, content)), msgtype="m.text")
            await self.outbox.post(room_id, render.edit(root, finished), plain_ok=True)

    async def send(self, conversation: ConversationKey, text: str) -> MessageRef:
        thread = conversation.thread or None
        if thread:
            self.cards.remember_thread(thread)
        # A tool result or a command's answer from the core, cut to what one event holds.
        event_id = await self.outbox.post(conversation.channel, render.message(fit(text, render.TEXT_BUDGET),
                                                                               thread=thread))
        return MessageRef(conversation, {"room": conversation.channel, "event": event_id})

    async def notify(self, conversation: ConversationKey, actor: Actor, text: str) -> None:
        # Matrix has no ephemeral messages: a short public notice naming the person, at most once a while per text.
        if not self.notices.allow(("notify", conversation.channel, actor.user_id, text)):
            return
        person = Mention(actor.user_id, actor.label())
        await self.outbox.post(conversation.channel, render.message(
            render.mentioned(person, text), thread=conversation.thread or None, mentions=[actor.user_id]))

    async def post_status(self, conversation: ConversationKey, status: StatusView) -> MessageRef:
        event_id = await self.outbox.post(conversation.channel, render.message(
            render.status_line(status), thread=conversation.thread or None))
        return MessageRef(conversation, {"room": conversation.channel, "event": event_id})

    async def update_status(self, ref: MessageRef, status: StatusView) -> None:
        content = render.message(render.status_line(status))
        await self.outbox.post(ref.data["room"], render.edit(ref.data["event"], content))

