"""The chat port for Matrix (`bridge.ports.ChatPort`): cards, plain messages, notices and status lines.

A card is a message naming the people it waits for, a poll per choice field and questions in its thread; its state
(`cards.Card`) goes into the card index, so that answers find it, and everything needed to find it again after a
restart goes into its `CardRef`.
"""

from __future__ import annotations

import logging
import time

import anyio

from adapters.matrix import render
from adapters.matrix.asking import Asker
from adapters.matrix.cards import Card, Poll, poll_fields, poll_map
from adapters.matrix.client import PLATFORM
from adapters.matrix.index import CardIndex
from adapters.matrix.outbox import Outbox, notice_limiter
from bridge.errors import AdapterError
from bridge.model import Actor, CardRef, ConversationKey, Interaction, MessageRef, Outcome, Status, StatusView
from bridge.ports import CLEANUP_TIMEOUT

logger = logging.getLogger(__name__)


def waits_for(interaction: Interaction) -> list[render.Mention]:
    """The people a card names: its requester when they decide alone, else its approvers on Matrix (on a private
    copy, the person it was sent to)."""
    requester = interaction.requester
    if requester is not None and requester.platform == PLATFORM and interaction.required < 2 and (
            not interaction.approvers or requester.key in interaction.approvers) and interaction.origin is None:
        return [render.Mention(requester.user_id, requester.label())]
    prefix = PLATFORM + ":"
    return [render.Mention(a[len(prefix):], a[len(prefix):]) for a in sorted(interaction.approvers)
            if a.startswith(prefix)]


class MatrixPort:
    platform = PLATFORM

    def __init__(self, outbox: Outbox, index: CardIndex, asker: Asker) -> None:
        self.outbox = outbox
        self.cards = index
        self.asker = asker
        self.notices = notice_limiter()

    async def post_card(self, interaction: Interaction) -> CardRef:
        conversation = interaction.conversation
        room_id = conversation.channel
        thread = conversation.thread or None
        people = waits_for(interaction)
        polls = poll_fields(interaction)
        text = render.card(interaction, people, now=time.time(), polls=len(polls),
                           questions=len(interaction.form.fields) - len(polls))
        root = await self.outbox.post(room_id, render.message(
            text, msgtype="m.text", thread=thread, mentions=[p.user_id for p in people],
            mark={"interaction": interaction.id, "part": "card"}))
        card = Card.new(interaction, room_id, root, thread or root)
        self.cards.add(card)
        try:
            for f in polls:
                event_id = await self.outbox.post(room_id, render.poll_start(
                    f, thread=card.thread, latest=card.latest,
                    mark={"interaction": interaction.id, "part": "poll", "field": f.name}),
                    event_type=render.POLL_START)
                card.polls[event_id] = Poll(event_id, f)
                card.latest = event_id
                self.cards.own(card, event_id)
            if polls:
                await self.asker.thread_post(card, render.message(render.poll_help(len(polls))))
            await self.asker.start(card)
        except BaseException as exc:
            # Half posted: the core will not finish a card it never got a ref for, so end it here (forgotten,
            # polls ended, root edited), or it would stay open and first in its thread, taking later replies.
            reason = f"the card could not be posted: {exc}" if isinstance(exc, AdapterError) else \
                "the card could not be posted"
            with anyio.move_on_after(CLEANUP_TIMEOUT, shield=True):
                try:
                    await self.finish_card(CardRef(interaction.id, card.ref_data()), interaction,
                                           Outcome(Status.FAILED, reason=reason))
                except AdapterError as cleanup:
                    logger.warning("could not end the half-posted card %s: %s", interaction.id, cleanup)
            raise
        return CardRef(interaction.id, card.ref_data())

    async def update_card(self, ref: CardRef, interaction: Interaction) -> None:
        """The card's first message edited to show its progress (approvals so far, who still may)."""
        polls = poll_fields(interaction)
        text = render.card(interaction, waits_for(interaction), now=time.time(), polls=len(polls),
                           questions=len(interaction.form.fields) - len(polls))
        room_id = ref.data.get("room", interaction.conversation.channel)
        await self.outbox.post(room_id, render.edit(ref.data["root"], render.message(text, msgtype="m.text")))

    async def finish_card(self, ref: CardRef, interaction: Interaction, outcome: Outcome) -> None:
        self.cards.pop(interaction.id)
        room_id = ref.data.get("room", interaction.conversation.channel)
        root = ref.data.get("root")
        failures: list[AdapterError] = []
        content = dict(outcome.content) if outcome.content else None
        if root:
            finished = render.message(render.finished(interaction, outcome,
                                                      render.content_lines(interaction, content)), msgtype="m.text")
            try:
                await self.outbox.post(room_id, render.edit(root, finished), plain_ok=True)
            except AdapterError as exc:
                failures.append(exc)
        for poll_id, name in poll_map(ref).items():
            try:
                f = interaction.form.field(name)
            except KeyError:
                continue
            value = content.get(name) if content and outcome.status is Status.ACCEPTED else None
            try:
                await self.outbox.post(room_id, render.poll_end(poll_id, f, value), event_type=render.POLL_END,
                                       plain_ok=True)
            except AdapterError as exc:
                failures.append(exc)
        if failures:
            raise failures[0]

    async def send(self, conversation: ConversationKey, text: str) -> MessageRef:
        thread = conversation.thread or None
        if thread:
            self.cards.remember_thread(thread)
        event_id = await self.outbox.post(conversation.channel, render.message(render.plain(text), thread=thread))
        return MessageRef(conversation, {"room": conversation.channel, "event": event_id})

    async def notify(self, conversation: ConversationKey, actor: Actor, text: str) -> None:
        # Matrix has no ephemeral messages: a short notice naming the person, at most once a while per text.
        if not self.notices.allow(("notify", conversation.channel, actor.user_id, text)):
            return
        person = render.Mention(actor.user_id, actor.label())
        await self.outbox.post(conversation.channel, render.message(
            render.mentioned(person, text), thread=conversation.thread or None, mentions=[actor.user_id]))

    async def post_status(self, conversation: ConversationKey, status: StatusView) -> MessageRef:
        event_id = await self.outbox.post(conversation.channel, render.message(
            render.status_line(status), thread=conversation.thread or None))
        return MessageRef(conversation, {"room": conversation.channel, "event": event_id})

    async def update_status(self, ref: MessageRef, status: StatusView) -> None:
        content = render.message(render.status_line(status))
        await self.outbox.post(ref.data["room"], render.edit(ref.data["event"], content))
