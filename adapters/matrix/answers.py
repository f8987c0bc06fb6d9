"""Answers on cards: poll votes, reactions and their removal, and replies, sent to the card they belong to, and late
answers on cards that have ended told so.

Form cards take their answers in `formflow`; approvals and links are answered here, with ✅ / ❌ / 🚫 on the card
and, after `edit`, the fields one at a time (`bridge.text.questions.Dialog`).

Who may answer is the core's call: before an answer changes a card, `Inbound.check` asks it (and the core tells a
refused person why); the final `Inbound.decide` applies the same rule again. The one rule kept here is the
adapter's own allow-list (`chat.matrix.allowed_users`), which holds also on cards that anyone may answer.

Every notice here is public: Matrix has no ephemeral messages, so a refusal or a late-answer notice is a short
`m.notice` in the room naming the person, at most one per person and text every `outbox.NOTICE_INTERVAL` seconds.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from adapters.matrix import formtext, render
from adapters.matrix.approval_thread import Asker
from adapters.matrix.cards import Card
from adapters.matrix.client import RoomEvent
from adapters.matrix.ended import Ended, EndedCard, looks_like_answer
from adapters.matrix.formflow import ANSWER_KEYS, DECIDE_KEYS, FormFlow
from adapters.matrix.formtext import WEB
from adapters.matrix.index import CardIndex
from adapters.matrix.settings import MatrixSettings
from adapters.matrix.translate import ReactionIn, RedactionIn, TextIn, VoteIn, command_text
from adapters.matrix.weblinks import WEB_WORDS, WebLinks
from bridge.door.model import Action, Actor, ConversationKey, DecisionIn, Verdict
from bridge.door.ports import Inbound, look_up
from bridge.errors import AdapterError
from bridge.text.questions import Step, StepKind

STRANGER = "Only people allowed to use this bridge can answer this request; your answer was not counted."
"""Told to someone outside `allowed_users` who answers a card (the core does not know the allow-list)."""
UNREACHABLE = ("The bridge worker holding this request is not answering (it may have stopped); your answer was not "
               "counted. If it stopped, the request will be closed shortly and the conversation told.")
"""Told when an answer reaches an open request whose card this adapter cannot rebuild from the store (a 2025-11-25
call: only the server session of the worker that posted it can take the answer)."""

Notify = Callable[[ConversationKey, Actor, str], Awaitable[None]]
OwnEvent = Callable[[str, str], Awaitable[RoomEvent | None]]
"""An event of a room if the bot sent it, else None."""
Adopt = Callable[[str], Awaitable[Card | None]]
"""An open card this process does not know, found in the store by its interaction id and indexed (`restore`)."""
MAX_LOOKED_UP = 2_000
"""Events fetched to see whether they were a card of an earlier run (the answer is kept, the oldest forgotten)."""


class Answers:
    def __init__(self, inbound: Inbound, settings: MatrixSettings, index: CardIndex, asker: Asker, forms: FormFlow,
                 ended: Ended, notify: Notify, *, own_event: OwnEvent | None = None,
                 web: WebLinks | None = None, adopt: Adopt | None = None) -> None:
        self.inbound = inbound
        self.web = web
        self.own_event = own_event
        self.adopt = adopt
        self._looked_up: OrderedDict[tuple[str, str], str] = OrderedDict()
        self.settings = settings
        self.index = index
        self.asker = asker
        self.forms = forms
        self.ended = ended
        self.notify = notify

    async def _may_answer(self, card: Card, actor: Actor) -> bool:
        """Whether `actor` may answer `card` now; someone who may not has been told (at most every so often)."""
        if not self.settings.user_allowed(actor.user_id):
            await self.notify(card.interaction.conversation, actor, STRANGER)
            return False
        result = await self.inbound.check(card.interaction.id, actor)
        return result.verdict is Verdict.CLAIMED

    async def _late(self, ended: EndedCard | None, actor: Actor) -> bool:
        """An answer to a card that has ended: one notice saying so (True), or nothing to say (False)."""
        if ended is None:
            return False
        if self.settings.user_allowed(actor.user_id):
            await self.notify(ended.conversation, actor, formtext.late(ended.how))
        return True

    async def _adopted(self, room_id: str, event_ids: tuple[str | None, ...]) -> Card | None:
        """An open card this process does not know, that an answer points at: posted (or taken over) by another
        worker of the bridge, found in the store through our mark on the event and indexed here from now on."""
        if self.own_event is None or self.adopt is None:
            return None
        for event_id in event_ids:
            if not event_id:
                continue
            interaction_id = await self._card_of_earlier_run(room_id, event_id)
            if interaction_id and await self.adopt(interaction_id) is not None:
                card = self.index.card_of(room_id, event_id)
                if card is not None:
                    return card
        return None

    async def _late_unindexed(self, room_id: str, event_ids: tuple[str | None, ...], actor: Actor) -> bool:
        """An answer to an event that is no card of this run: if it was one of an earlier run's cards (ended at a
        restart, say), the core tells the person how that request ended (True); if it is still open but its events
        cannot be found from here (posted by another process), the person is told so (True)."""
        if self.own_event is None or not self.settings.user_allowed(actor.user_id):
            return False
        for event_id in event_ids:
            if not event_id:
                continue
            interaction_id = await self._card_of_earlier_run(room_id, event_id)
            found = await look_up(self.inbound, interaction_id) if interaction_id else None
            if found is not None:
                # LATE: the core says how it ended; CLAIMED: open, and they may answer, but not through this card.
                result = await self.inbound.check(found.interaction.id, actor)
                if result.verdict is Verdict.CLAIMED:
                    await self.notify(found.interaction.conversation, actor, UNREACHABLE)
                return True
        return False

    async def _card_of_earlier_run(self, room_id: str, event_id: str) -> str:
        """The interaction an event of ours was posted for ('' for anything else), read from our mark on it; only
        our own events are trusted, and each event is fetched once."""
        key = (room_id, event_id)
        if key in self._looked_up:
            self._looked_up.move_to_end(key)
            return self._looked_up[key]
        found = ""
        assert self.own_event is not None
        try:
            event = await self.own_event(room_id, event_id)
        except AdapterError:
            event = None
        if event is not None:
            content = event.source.get("content")
            mark = content.get(render.MARK) if isinstance(content, Mapping) else None
            found = str(mark.get("interaction", "")) if isinstance(mark, Mapping) else ""
        self._looked_up[key] = found
        while len(self._looked_up) > MAX_LOOKED_UP:
            self._looked_up.popitem(last=False)
        return found

    # -- votes, reactions, redactions ----------------------------------------------------------------------------

    async def vote(self, vote: VoteIn, actor: Actor) -> None:
        card = self.index.card_of(vote.room_id, vote.poll_id)
        if card is None:
            ended = self.ended.of(vote.room_id, vote.poll_id)
            card = await self._adopted(vote.room_id, (vote.poll_id,)) if ended is None else None
            if card is None:
                if not await self._late(ended, actor):
                    await self._late_unindexed(vote.room_id, (vote.poll_id,), actor)
                return
        if card.form is None or not await self._may_answer(card, actor):
            return
        await self.forms.vote(card, vote, actor)

    async def reaction(self, reaction: ReactionIn, actor: Actor, timestamp: int) -> None:
        card = self.index.card_of(reaction.room_id, reaction.target)
        if card is None:
            if reaction.key not in DECIDE_KEYS and reaction.key not in ANSWER_KEYS and reaction.key != WEB:
                return  # someone's emoji, not an answer
            ended = self.ended.of(reaction.room_id, reaction.target)
            card = await self._adopted(reaction.room_id, (reaction.target,)) if ended is None else None
            if card is None:
                if reaction.key != WEB and not await self._late(ended, actor):
                    await self._late_unindexed(reaction.room_id, (reaction.target,), actor)
                return
        if reaction.key == WEB and reaction.target == card.root and self._offers_web(card):
            if await self._may_answer(card, actor):
                assert self.web is not None
                await self.web.send(card, actor)
            return
        if card.form is not None:
            if not self.forms.answers_key(card, reaction.target, reaction.key):
                why = self.forms.misplaced(card, reaction.target, reaction.key)
                if why and await self._may_answer(card, actor):
                    await self.notify(card.interaction.conversation, actor, why)
                return  # else someone's emoji, not an answer
            if await self._may_answer(card, actor):
                await self.forms.reaction(card, reaction, actor, timestamp)
            return
        await self._approval_reaction(card, reaction, actor)

    async def redaction(self, redaction: RedactionIn) -> None:
        """A reaction taken back (Element's second tap on it): the pick it made is gone."""
        card = self.index.card_of(redaction.room_id, redaction.redacts)
        if card is not None and card.form is not None:
            await self.forms.redaction(card, redaction)

    # -- replies -------------------------------------------------------------------------------------------------

    async def reply(self, text: TextIn, actor: Actor, timestamp: int) -> bool:
        """A text that replies to a card (or is said in its thread): True when a card took it (or it was a late
        answer to one, now told so). Commands are never answers."""
        if command_text(text.body) is not None:
            return False
        rel = text.relation
        card = self.index.card_of(text.room_id, rel.reply_to) or self.index.card_in_thread(text.room_id, rel.thread)
        ended = self._ended_for(text) if card is None else None
        if card is None and ended is None:
            # A card another worker posted: a reply to one of its events, or said in its thread.
            card = await self._adopted(text.room_id, (rel.reply_to, rel.fallback, rel.thread)) or \
                self.index.card_in_thread(text.room_id, rel.thread)
        if card is None:
            return await self._late(ended, actor) or \
                await self._late_unindexed(text.room_id, (rel.reply_to,), actor)
        if not await self._may_answer(card, actor):
            return True
        if card.form is not None and self._asks_for_web(card, text.body):
            assert self.web is not None
            await self.web.send(card, actor)
            return True
        if card.form is not None:
            await self.forms.reply(card, text, actor, timestamp)
            return True
        assert card.dialog is not None
        await self._run(card, card.reply(text.body), actor)
        return True

    def _offers_web(self, card: Card) -> bool:
        return card.form is not None and self.web is not None and not card.interaction.form.empty and \
            self.web.enabled()

    def _asks_for_web(self, card: Card, body: str) -> bool:
        """A reply `!web` (or `web` once no typed question waits, where it could be an answer)."""
        word = body.strip().lower()
        if word not in WEB_WORDS or not self._offers_web(card):
            return False
        assert card.form is not None
        return word.startswith("!") or not card.form.state.pending()

    def _ended_for(self, text: TextIn) -> EndedCard | None:
        """The ended card a message answers, if it answers one (see `ended`)."""
        rel = text.relation
        for event_id in (rel.reply_to, rel.fallback):
            ended = self.ended.of(text.room_id, event_id)
            if ended is not None:
                return ended
        ended = self.ended.in_thread(text.room_id, rel.thread)
        return ended if ended is not None and looks_like_answer(text.body, ended) else None

    # -- approvals and links -------------------------------------------------------------------------------------

    async def _approval_reaction(self, card: Card, reaction: ReactionIn, actor: Actor) -> None:
        action = DECIDE_KEYS.get(reaction.key)
        if action is None:
            return  # someone's emoji, not an answer
        if not await self._may_answer(card, actor):
            return
        if action != "accept":
            # Declining or cancelling needs no answers: it counts on any part of the card, at any time.
            await self._decide(card, actor, action, None)
            return
        assert card.dialog is not None
        if not card.confirming:
            q = card.dialog.question()
            await self.notify(card.interaction.conversation, actor,
                              f"Answer the questions in the thread first (now: {q.text}).")
            return
        await self._run(card, card.dialog.answer(render.ACCEPT), actor)

    async def _run(self, card: Card, step: Step, actor: Actor) -> None:
        """Carry out one step of an approval's dialog: ask, re-ask, or send the decision to the core."""
        if step.kind is StepKind.DONE:
            assert step.action is not None
            await self._decide(card, actor, step.action, step.content, step.grant)
            return
        await self.asker.ask(card, step.message if step.kind is StepKind.REASK else "")

    async def _decide(self, card: Card, actor: Actor, action: Action, content: Mapping[str, Any] | None,
                      grant: str = "") -> None:
        result = await self.inbound.decide(DecisionIn(card.interaction.id, actor, action, content, grant))
        if result.verdict is Verdict.CLAIMED:
            card.done = True
        elif result.verdict is Verdict.INVALID and card.dialog is not None:
            step = card.dialog.rejected(result.errors)
            await self.asker.ask(card, step.message)
        # REFUSED, LATE and UNKNOWN: the core has told the person already.
