"""What the bot says in an approval card's thread: the fields one at a time when a person replies `edit`, the summary,
and the reactions that answer. (Form cards are asked all at once: `formflow`.)

The card's dialog (`bridge.text.questions.Dialog`, the same state machine as the console) decides what to ask; this
posts it, as a reply to the last thing the bot said there (for clients without threads), and records the events it
posted in the card index so that answers to them find the card.
"""

from __future__ import annotations

from typing import Any

from adapters.matrix import render
from adapters.matrix.cards import Card
from adapters.matrix.index import CardIndex
from adapters.matrix.markup import fit
from adapters.matrix.outbox import Outbox


class Asker:
    def __init__(self, outbox: Outbox, index: CardIndex) -> None:
        self.outbox = outbox
        self.index = index

    async def start(self, card: Card, *, react: bool = True) -> None:
        """A new (or restored) approval: answered on the card itself, so it gets its reactions."""
        if react:
            await self.pre_react(card.room_id, card.root)

    async def ask(self, card: Card, reason: str = "") -> None:
        """Ask the dialog's current question (or show the summary), with the reason the last answer was refused."""
        assert card.dialog is not None
        q = card.dialog.question()
        if q.field is None:
            if card.question is None:
                # Nothing was edited: the card itself (with its reactions) is the summary.
                if reason:
                    await self.thread_post(card, render.message(fit("⚠ " + reason + " " + q.hint, 4_000)))
                return
            await self._post_summary(card, reason)
            return
        event_id = await self.thread_post(card, render.message(
            render.question(q, reason), mark={"interaction": card.interaction.id, "part": "question",
                                              "field": q.field.name}))
        card.question = event_id
        self.index.own(card, event_id)

    async def _post_summary(self, card: Card, reason: str = "") -> None:
        event_id = await self.thread_post(card, self._summary_content(card, reason))
        card.summary = event_id
        self.index.own(card, event_id)
        await self.pre_react(card.room_id, event_id)

    def _summary_content(self, card: Card, reason: str = "") -> dict[str, Any]:
        assert card.dialog is not None
        return render.message(render.summary(card.dialog.summary_lines(), card.dialog.question(), reason=reason),
                              mark={"interaction": card.interaction.id, "part": "summary"})

    async def pre_react(self, room_id: str, event_id: str) -> None:
        # Our own reactions make the choices clickable pills in Element; they are ignored when they come back.
        for key in (render.ACCEPT, render.DECLINE, render.CANCEL):
            await self.outbox.post(room_id, render.reaction(event_id, key), event_type="m.reaction")

    async def thread_post(self, card: Card, content: dict[str, Any]) -> str:
        """Post into the card's thread, as a reply to the last thing we said there (for clients without threads)."""
        content = {**content, "m.relates_to": render.thread_relation(card.thread, card.latest)}
        event_id = await self.outbox.post(card.room_id, content)
        card.latest = event_id
        self.index.remember_thread(card.thread)
        return event_id
