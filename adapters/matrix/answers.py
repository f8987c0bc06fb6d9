"""Answers on cards: poll votes, replies in a card's thread and reactions, turned into dialog steps and decisions.

Who may answer is the core's call: before an answer changes a card, `Inbound.check` asks it (and the core tells a
refused person why); the final `Inbound.decide` applies the same rule again. The one rule kept here is the
adapter's own allow-list (`chat.matrix.allowed_users`), which holds also on cards that anyone may answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from adapters.matrix import render
from adapters.matrix.asking import Asker
from adapters.matrix.cards import Card
from adapters.matrix.index import CardIndex
from adapters.matrix.settings import MatrixSettings
from adapters.matrix.translate import ReactionIn, TextIn, VoteIn, command_text
from bridge.dialog import Step, StepKind
from bridge.model import Action, Actor, ConversationKey, DecisionIn, Verdict
from bridge.ports import Inbound

STRANGER = "Only people allowed to use this bridge can answer this request; your answer was not counted."
"""Told to someone outside `allowed_users` who answers a card (the core does not know the allow-list)."""
CARD_COMMANDS = ("!decline", "!cancel")
"""Replies to a poll that decide the whole card rather than answer the poll."""

Notify = Callable[[ConversationKey, Actor, str], Awaitable[None]]


class Answers:
    def __init__(self, inbound: Inbound, settings: MatrixSettings, index: CardIndex, asker: Asker,
                 notify: Notify) -> None:
        self.inbound = inbound
        self.settings = settings
        self.index = index
        self.asker = asker
        self.notify = notify

    async def _may_answer(self, card: Card, actor: Actor) -> bool:
        """Whether `actor` may answer `card` now; someone who may not has been told (at most every so often)."""
        if not self.settings.user_allowed(actor.user_id):
            await self.notify(card.interaction.conversation, actor, STRANGER)
            return False
        result = await self.inbound.check(card.interaction.id, actor)
        return result.verdict is Verdict.CLAIMED

    async def vote(self, vote: VoteIn, actor: Actor) -> None:
        card = self.index.card_of(vote.room_id, vote.poll_id)
        if card is None or not await self._may_answer(card, actor):
            return
        poll = card.polls[vote.poll_id]
        if card.vote(poll, vote.sender, vote.timestamp, render.poll_value(poll.field, vote.answers)):
            await self.asker.refresh_summary(card)

    async def reaction(self, reaction: ReactionIn, actor: Actor, timestamp: int) -> None:
        card = self.index.card_of(reaction.room_id, reaction.target)
        if card is None:
            return
        key = reaction.key
        poll = card.poll_for(reaction.target)
        if key not in (render.ACCEPT, render.DECLINE, render.CANCEL) and (poll is None or key not in render.KEYCAPS):
            return  # someone's emoji, not an answer
        if not await self._may_answer(card, actor):
            return
        if poll is not None and key in render.KEYCAPS:
            if card.keycap(poll, reaction.sender, timestamp, key):
                await self.asker.refresh_summary(card)
            return
        if key != render.ACCEPT:
            # Declining or cancelling needs no answers: it counts on any part of the card, at any time.
            await self._decide(card, actor, "decline" if key == render.DECLINE else "cancel", None)
            return
        if not card.confirming:
            q = card.dialog.question()
            await self.notify(card.interaction.conversation, actor,
                              f"Answer the questions in the thread first (now: {q.text}).")
            return
        await self._run(card, card.dialog.answer(key), actor)

    async def reply(self, text: TextIn, actor: Actor, timestamp: int) -> bool:
        """A text that replies to a card (or is said in its thread): True when a card took it. Commands are never
        answers."""
        if command_text(text.body) is not None:
            return False
        card = self.index.card_of(text.room_id, text.relation.reply_to) or \
            self.index.card_in_thread(text.room_id, text.relation.thread)
        if card is None:
            return False
        if not await self._may_answer(card, actor):
            return True
        poll = card.poll_for(text.relation.reply_to or "")
        if poll is not None and text.body.strip().lower() not in CARD_COMMANDS:
            reason = card.poll_reply(poll, text.sender, timestamp, text.body)
            if reason:
                await self.notify(card.interaction.conversation, actor, f"{reason.capitalize()}.")
            else:
                await self.asker.refresh_summary(card)
            return True
        await self._run(card, card.reply(text.body), actor)
        return True

    async def _run(self, card: Card, step: Step, actor: Actor) -> None:
        """Carry out one step of a card's dialog: ask, re-ask, or send the decision to the core."""
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
        elif result.verdict is Verdict.INVALID:
            polls = card.poll_errors(result.errors)
            if polls:
                reason = "; ".join(f"{title}: {why}" for title, why in polls.items())
                await self.asker.ask(card, f"Please fix the poll answers first ({reason}).")
            else:
                step = card.dialog.rejected(result.errors)
                await self.asker.ask(card, step.message)
        # REFUSED, LATE and UNKNOWN: the core has told the person already.
