"""What the bot says in a card's thread: its questions one at a time, the summary, and the reactions that answer.

A card's text dialog (`cards.Card.dialog`, the same state machine as the console) decides what to ask; this posts it,
as a reply to the last thing the bot said there (for clients without threads), and records the events it posted in
the card index so that answers to them find the card.
"""

from __future__ import annotations

from typing import Any

from adapters.matrix import render
from adapters.matrix.cards import Card
from adapters.matrix.index import CardIndex
from adapters.matrix.outbox import Outbox


class Asker:
    def __init__(self, outbox: Outbox, index: CardIndex) -> None:
        self.outbox = outbox
        self.index = index

    async def start(self, card: Card, *, react: bool = True) -> None:
        """Ask a new (or restored) card's first question; cards answered on themselves get their reactions."""
        if card.root_is_summary and react:
            await self.pre_react(card.room_id, card.root)
        step = card.dialog.start()
        if step.question is not None and step.question.field is None and card.root_is_summary:
            return
        await self.ask(card)

    async def ask(self, card: Card, reason: str = "") -> None:
        """Ask the dialog's current question (or show the summary), with the reason the last answer was refused."""
        q = card.dialog.question()
        if q.field is None:
            if card.root_is_summary and card.question is None:
                # Nothing was edited: the card itself (with its reactions) is the summary.
                if reason:
                    await self.thread_post(card, render.message(render.plain("⚠ " + reason + " " + q.hint),
                                                                msgtype="m.text"))
                return
            await self._post_summary(card, reason)
            return
        event_id = await self.thread_post(card, render.message(
            render.question(q, reason), msgtype="m.text", mark={"interaction": card.interaction.id,
                                                                 "part": "question", "field": q.field.name}))
        card.question = event_id
        self.index.own(card, event_id)

    async def _post_summary(self, card: Card, reason: str = "") -> None:
        event_id = await self.thread_post(card, self._summary_content(card, reason))
        card.summary = event_id
        self.index.own(card, event_id)
        await self.pre_react(card.room_id, event_id)

    def _summary_content(self, card: Card, reason: str = "") -> dict[str, Any]:
        return render.message(render.summary(card.dialog.summary_lines(), card.dialog.question(), reason=reason,
                                             poll_note=bool(card.polls)),
                              msgtype="m.text", mark={"interaction": card.interaction.id, "part": "summary"})

    async def refresh_summary(self, card: Card) -> None:
        """A vote changed an answer after the summary was shown: edit it, so what is accepted is what is shown."""
        if card.summary is None or card.done:
            return
        await self.outbox.post(card.room_id, render.edit(card.summary, self._summary_content(card)))

    async def pre_react(self, room_id: str, event_id: str) -> None:
        # Our own reactions make the choices clickable pills in Element; they are ignored when they come back.
        for key in (render.ACCEPT, render.DECLINE, render.CANCEL):
            await self.outbox.post(room_id, render.reaction(event_id, key), event_type="m.reaction")

    async def thread_post(self, card: Card, content: dict[str, Any]) -> str:
        """Post into the card's thread, as a reply to the last thing we said there (for clients without threads)."""
        content = {**content, "m.relates_to": render.thread_relation(card.thread, card.latest)}
        event_id = await self.outbox.post(card.room_id, content)
        card.latest = event_id
        return event_id
