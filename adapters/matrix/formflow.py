"""A form card's life in a room: posting it, taking its answers, sending it, and showing how it ended.

What the person gets, for server-everything's 13 fields: one message that pings them (the card, `m.text`, mentioning
them; everything after it is `m.notice`, polls, reactions or edits, none of which notify under Synapse's default push
rules), listing the seven typed questions and two fields answered by reacting to it; three polls in the room's
timeline; one list to react to. One reply with seven lines answers the typed questions; the card is edited to show
what was taken, a re-ask lists only the lines that did not fit, and once the form can be sent the bot puts ✅ on the
card, so that sending is one tap. At the end the card is edited to the outcome, the polls are ended and the list
is edited: twelve events in all when nothing has to be asked again.

Who may answer is the core's call (`answers.Answers` asks it before anything here changes a card).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from adapters.matrix import formtext, render
from adapters.matrix.cards import Card, FormParts, stored_events
from adapters.matrix.client import PLATFORM
from adapters.matrix.formstate import FormState, parse
from adapters.matrix.index import CardIndex
from adapters.matrix.layout import KEYCAPS, NO, YES, Slot, plan
from adapters.matrix.markup import Mention
from adapters.matrix.outbox import Outbox
from adapters.matrix.translate import ReactionIn, RedactionIn, TextIn, VoteIn
from bridge.door.model import Action, Actor, CardRef, ConversationKey, DecisionIn, Interaction, Outcome, Status, Verdict
from bridge.door.ports import Inbound
from bridge.errors import AdapterError

logger = logging.getLogger(__name__)

Notify = Callable[[ConversationKey, Actor, str], Awaitable[None]]
ANSWER_KEYS = frozenset({YES, NO, *KEYCAPS})
DECIDE_KEYS: dict[str, Action] = {render.ACCEPT: "accept", render.DECLINE: "decline", render.CANCEL: "cancel"}


class FormFlow:
    def __init__(self, inbound: Inbound, outbox: Outbox, index: CardIndex, notify: Notify) -> None:
        self.inbound = inbound
        self.outbox = outbox
        self.index = index
        self.notify = notify

    # -- posting -------------------------------------------------------------------------------------------------

    async def post(self, interaction: Interaction, people: Sequence[Mention],
                   on_root: Callable[[Card], None]) -> Card:
        """Post a form card: the card itself, its polls, its lists, and ✅ if it can be sent as it is. `on_root` is
        called as soon as the card exists (so that a failure half way can still end it)."""
        conversation = interaction.conversation
        room_id = conversation.channel
        thread = conversation.thread or None
        layout = plan(interaction.form)
        parts = FormParts(layout, FormState(layout))
        problems = parts.state.problems(interaction.form)
        text = formtext.card(interaction, layout, parts.state, people, now=time.time(), in_thread=thread is not None,
                             problems=problems, web=self._web(interaction))
        root = await self.outbox.post(room_id, render.message(
            text, msgtype="m.text", thread=thread, mentions=[p.user_id for p in people],
            mark={"interaction": interaction.id, "part": "card"}))
        card = Card(interaction, room_id, root, thread or root, form=parts, latest=root)
        self.index.add(card)
        on_root(card)
        for slot in layout.polls:
            # At the top level: Element shows polls in threads badly (element-web#20282).
            event_id = await self.outbox.post(room_id, formtext.poll(layout, slot, mark={
                "interaction": interaction.id, "part": "poll", "field": slot.field.name}), event_type=render.POLL_START)
            parts.polls[event_id] = slot
            self.index.own(card, event_id)
        for slot in layout.lists:
            content = render.message(formtext.list_message(layout, slot), thread=thread, latest=card.latest,
                                     mark={"interaction": interaction.id, "part": "list", "field": slot.field.name})
            event_id = await self.outbox.post(room_id, content)
            if thread:
                card.latest = event_id
            parts.lists[event_id] = slot
            self.index.own(card, event_id)
        if not problems:
            await self._add_pill(card)
        return card

    async def _add_pill(self, card: Card) -> None:
        # Our own ✅ makes sending one tap in Element (a pill to tap); it is ignored when it comes back.
        assert card.form is not None
        card.form.pill = True
        await self.outbox.post(card.room_id, render.reaction(card.root, render.ACCEPT), event_type="m.reaction")

    def _web(self, interaction: Interaction) -> bool:
        """Whether the card offers a private web-form link (web forms are on, and there is something to fill)."""
        return not interaction.form.empty and self.inbound.web_forms_enabled()

    # -- answers -------------------------------------------------------------------------------------------------

    def answers_key(self, card: Card, target: str, key: str) -> bool:
        """Whether a reaction is an answer on this card (and not someone's emoji)."""
        if key in DECIDE_KEYS:
            return target in card.events()
        place = card.place_of(target)
        return place is not None and card.form is not None and \
            card.form.state.reaction_slot(place, key) is not None

    def misplaced(self, card: Card, target: str, key: str) -> str:
        """Why a number reaction answers nothing where it was put ('' when it is no number, or fits)."""
        place = card.place_of(target)
        if key not in KEYCAPS or place is None or card.form is None:
            return ""
        slot = card.form.layout.keycaps_at(place)
        if slot is None:
            return "Nothing on this message is answered with numbers."
        n = len(slot.field.options)
        return f"Question {slot.number} has {n} options: react with 1️⃣-{KEYCAPS[n - 1]}."

    async def vote(self, card: Card, vote: VoteIn, actor: Actor) -> None:
        assert card.form is not None
        slot = card.form.polls.get(vote.poll_id)
        if slot is not None and card.form.state.vote(slot, vote.timestamp, vote.answers):
            await self._changed(card)

    async def reaction(self, card: Card, reaction: ReactionIn, actor: Actor, timestamp: int) -> None:
        assert card.form is not None
        action = DECIDE_KEYS.get(reaction.key)
        if action is not None:
            await self._decide_or_send(card, actor, action)
            return
        place = card.place_of(reaction.target)
        if place is None:
            return
        if card.form.state.react(reaction.event_id, reaction.sender, place, reaction.key, timestamp) is not None:
            self.index.own(card, reaction.event_id)  # its redaction (a second tap) must find the card
            await self._changed(card)

    async def redaction(self, card: Card, redaction: RedactionIn) -> None:
        assert card.form is not None
        if card.form.state.unreact(redaction.redacts, redaction.timestamp) is not None:
            await self._changed(card)

    async def reply(self, card: Card, text: TextIn, actor: Actor, timestamp: int) -> None:
        form = card.form
        assert form is not None
        slot = form.polls.get(text.relation.reply_to or "") or form.lists.get(text.relation.reply_to or "")
        body = text.body.strip()
        if slot is not None and body.lower() not in ("!decline", "!cancel"):
            await self._reply_to_field(card, slot, body, actor, timestamp)
            return
        result = form.state.reply(text.body, timestamp)
        if result.command is not None:
            await self._decide_or_send(card, actor, result.command)
            return
        if result.problem:
            await self.notify(card.interaction.conversation, actor, result.problem)
            return
        if result.failed:
            await self._reask(card, form.state.failed)
            return
        form.reask = None  # what it asked is answered now
        if result.taken:
            await self._show_progress(card)
        await self._changed(card)

    async def _reply_to_field(self, card: Card, slot: Slot, body: str, actor: Actor, timestamp: int) -> None:
        """A reply to a poll or a list: the answer to its field (numbers, values or titles; `-` for the default)."""
        assert card.form is not None
        try:
            value = parse(slot.field, body)
        except ValueError as exc:
            await self.notify(card.interaction.conversation, actor, f"Question {slot.number}: {exc}.")
            return
        card.form.state.set(slot, timestamp, value)
        await self._changed(card)

    async def _changed(self, card: Card) -> None:
        """An answer changed: once the form can be sent, put ✅ on the card (once)."""
        assert card.form is not None
        if not card.form.pill and not card.form.state.problems(card.interaction.form):
            await self._add_pill(card)

    async def refresh(self, card: Card) -> None:
        """After a restart: the card shows what is still answered (typed answers were not kept)."""
        await self._show_progress(card)
        await self._changed(card)

    async def _show_progress(self, card: Card) -> None:
        assert card.form is not None
        f = card.form
        people = [Mention(p.user_id, p.name) for p in waits_for(card.interaction)]
        text = formtext.card(card.interaction, f.layout, f.state, people, now=time.time(),
                             in_thread=bool(card.interaction.conversation.thread),
                             problems=f.state.problems(card.interaction.form),
                             web=self._web(card.interaction))
        await self.outbox.post(card.room_id, render.edit(card.root, render.message(text, msgtype="m.text")))

    async def _reask(self, card: Card, problems: Mapping[int, str], *, sending: bool = False) -> None:
        assert card.form is not None
        content = render.message(formtext.reask(card.form.layout, problems, sending=sending),
                                 thread=card.thread, latest=card.latest,
                                 mark={"interaction": card.interaction.id, "part": "reask"})
        event_id = await self.outbox.post(card.room_id, content)
        card.latest = event_id
        card.form.reask = event_id
        self.index.own(card, event_id)

    async def _decide_or_send(self, card: Card, actor: Actor, action: Action) -> None:
        assert card.form is not None
        content: dict[str, Any] | None = None
        if action == "accept":
            problems = card.form.state.problems(card.interaction.form)
            if problems:
                await self._reask(card, problems, sending=True)
                return
            content = card.form.state.content()
        result = await self.inbound.decide(DecisionIn(card.interaction.id, actor, action, content))
        if result.verdict is Verdict.CLAIMED:
            card.done = True
        elif result.verdict is Verdict.INVALID:
            layout = card.form.layout
            problems = {(s.number if (s := layout.named(name)) else 0): why for name, why in result.errors.items()}
            await self._reask(card, problems or {0: result.message}, sending=True)
        # REFUSED, LATE and UNKNOWN: the core has told the person already.

    # -- the end -------------------------------------------------------------------------------------------------

    async def finish(self, ref: CardRef, interaction: Interaction, outcome: Outcome, card: Card | None) -> None:
        """Edit the card to its outcome, end its polls, close its lists (and an open re-ask)."""
        room_id = ref.data.get("room", interaction.conversation.channel)
        layout = card.form.layout if card is not None and card.form is not None else plan(interaction.form)
        content = dict(outcome.content) if outcome.content and outcome.status is Status.ACCEPTED else {}
        failures: list[AdapterError] = []

        async def send(data: Mapping[str, Any], event_type: str = "m.room.message") -> None:
            try:
                await self.outbox.post(room_id, data, event_type=event_type, plain_ok=True)
            except AdapterError as exc:
                failures.append(exc)

        root = ref.data.get("root")
        if root:
            text = formtext.finished(interaction, layout, outcome, content)
            await send(render.edit(root, render.message(text, msgtype="m.text")))
        for event_id, name in stored_events(ref, "polls").items():
            slot = layout.named(name)
            if slot is not None:
                await send(formtext.poll_end(layout, event_id, slot, outcome, content.get(name)), render.POLL_END)
        for event_id, name in stored_events(ref, "lists").items():
            slot = layout.named(name)
            if slot is not None:
                ended = formtext.list_ended(layout, slot, outcome, content.get(name))
                await send(render.edit(event_id, render.message(ended)))
        if card is not None and card.form is not None and card.form.reask:
            await send(render.edit(card.form.reask, render.message(formtext.ended_note(outcome))))
        if failures:
            raise failures[0]


def waits_for(interaction: Interaction) -> list[Mention]:
    """The people a card names: its requester when they decide alone, else its approvers on Matrix (on a private
    copy, the person it was sent to)."""
    requester = interaction.requester
    if requester is not None and requester.platform == PLATFORM and interaction.required < 2 and (
            not interaction.approvers or requester.key in interaction.approvers) and interaction.origin is None:
        return [Mention(requester.user_id, requester.label())]
    prefix = PLATFORM + ":"
    return [Mention(a[len(prefix):], a[len(prefix):]) for a in sorted(interaction.approvers)
            if a.startswith(prefix)]

