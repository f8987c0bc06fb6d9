"""Cards that have ended, remembered for a while so that a late answer gets told so. No I/O.

A vote, reaction or reply that reaches a finished card is not counted, and the person gets one notice (rate-limited)
saying the request has ended and how. Matrix threads outlive cards, so a message in a thread is taken as a late
answer only when it points at the card (a reply to one of its events, or a thread message whose reply fallback is
one of them), or, in the thread of the card that ended last there, when it has the shape of an answer to that card
(numbered lines, one line per question, or `send`): anything else in the thread is a new message for the bot.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass

from adapters.matrix.cards import Card
from adapters.matrix.formstate import SEND_WHEN_ANSWERED, SEND_WORDS, SKIP_WORDS
from bridge.door.model import ConversationKey, Outcome
from bridge.text.presentation import describe_status

MAX_ENDED_EVENTS = 20_000
"""Events of ended cards remembered (the oldest are forgotten)."""
MAX_ENDED_THREADS = 2_000
_WORDS = SEND_WORDS | SEND_WHEN_ANSWERED | SKIP_WORDS | {"!decline", "!cancel"}
_NUMBERED = re.compile(r"^\s*#?(\d{1,6})\s*(?:[.:)=]\s+|[:)=](?=\D))")


@dataclass(frozen=True, slots=True)
class EndedCard:
    interaction_id: str
    room_id: str
    conversation: ConversationKey
    how: str
    """How it ended: 'accepted by Ada', 'expired'."""
    lines: int = 0
    """How many typed questions it had (0 for approvals)."""
    fields: int = 0


class Ended:
    def __init__(self) -> None:
        self._events: OrderedDict[str, EndedCard] = OrderedDict()
        self._threads: OrderedDict[tuple[str, str], EndedCard] = OrderedDict()

    def add(self, card: Card, outcome: Outcome) -> EndedCard:
        layout = card.form.layout if card.form is not None else None
        ended = EndedCard(card.interaction.id, card.room_id, card.interaction.conversation, describe_status(outcome),
                          len(layout.lines) if layout else 0, len(layout.slots) if layout else 0)
        for event_id in card.owned | card.events():
            self._events[event_id] = ended
            self._events.move_to_end(event_id)
        while len(self._events) > MAX_ENDED_EVENTS:
            self._events.popitem(last=False)
        key = (card.room_id, card.thread)
        self._threads[key] = ended
        self._threads.move_to_end(key)
        while len(self._threads) > MAX_ENDED_THREADS:
            self._threads.popitem(last=False)
        return ended

    def of(self, room_id: str, event_id: str | None) -> EndedCard | None:
        """The ended card an event belongs to (in the room the answer came from)."""
        ended = self._events.get(event_id or "")
        return ended if ended is not None and ended.room_id == room_id else None

    def in_thread(self, room_id: str, thread: str | None) -> EndedCard | None:
        """The card that ended last in a thread."""
        return self._threads.get((room_id, thread or ""))

    def forget_thread(self, room_id: str, thread: str) -> None:
        """A new card opened in the thread: messages there are for it now."""
        self._threads.pop((room_id, thread), None)


def looks_like_answer(text: str, ended: EndedCard) -> bool:
    """Whether a message in an ended card's thread reads as an answer to it (and not as a new message for the bot)."""
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    if not lines:
        return False
    if len(lines) == 1 and lines[0].lower().rstrip(".!") in _WORDS:
        return True
    if ended.fields and all((m := _NUMBERED.match(line)) and 1 <= int(m.group(1)) <= ended.fields
                            for line in lines):
        return True
    return ended.lines >= 2 and len(lines) == ended.lines
