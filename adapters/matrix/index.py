"""Where the open cards are: found again from any event that belongs to one, or from the thread it asks in. No I/O.

Also remembers the threads the bot has spoken in (cards and answers), so that a reply there is taken as addressed
to the bot without naming it.
"""

from __future__ import annotations

from collections import OrderedDict

from adapters.matrix.cards import Card

MAX_BOT_THREADS = 10_000
"""Threads the bot answered in that it remembers (the least recently used are forgotten)."""


class CardIndex:
    def __init__(self) -> None:
        self._by_id: dict[str, Card] = {}
        self._by_event: dict[str, str] = {}
        self._by_thread: dict[str, list[str]] = {}
        self._bot_threads: OrderedDict[str, None] = OrderedDict()

    def add(self, card: Card) -> None:
        self._by_id[card.interaction.id] = card
        self._by_thread.setdefault(card.thread, []).append(card.interaction.id)
        self.remember_thread(card.thread)
        for event_id in card.events():
            self.own(card, event_id)

    def own(self, card: Card, event_id: str) -> None:
        """An event posted for `card` (a poll, a question, a summary): answers to it find the card."""
        card.owned.add(event_id)
        self._by_event[event_id] = card.interaction.id

    def pop(self, interaction_id: str) -> Card | None:
        """Forget a card (it is finished): marked done, and no event or thread leads to it any more."""
        card = self._by_id.pop(interaction_id, None)
        if card is None:
            return None
        card.done = True
        for event_id in card.owned | card.events():
            self._by_event.pop(event_id, None)
        ids = self._by_thread.get(card.thread)
        if ids is not None:
            if card.interaction.id in ids:
                ids.remove(card.interaction.id)
            if not ids:
                del self._by_thread[card.thread]
        return card

    def cards(self) -> list[Card]:
        return list(self._by_id.values())

    def card(self, interaction_id: str) -> Card | None:
        return self._by_id.get(interaction_id)

    def card_of(self, room_id: str, event_id: str | None) -> Card | None:
        """The open card an event refers to, if it is in the room the event came from: an event id from another
        room must not answer a card (a request anyone may answer would otherwise be open to any room)."""
        if not event_id:
            return None
        interaction_id = self._by_event.get(event_id)
        card = self._by_id.get(interaction_id) if interaction_id else None
        if card is None or card.done or card.interaction.conversation.channel != room_id:
            return None
        return card

    def card_in_thread(self, room_id: str, thread: str | None) -> Card | None:
        """The oldest open card asking in a thread: it answers first."""
        for interaction_id in self._by_thread.get(thread or "", ()):
            card = self._by_id.get(interaction_id)
            if card is not None and not card.done and card.interaction.conversation.channel == room_id:
                return card
        return None

    # -- the bot's threads ---------------------------------------------------------------------------------------

    def remember_thread(self, thread: str) -> None:
        self._bot_threads[thread] = None
        self._bot_threads.move_to_end(thread)
        while len(self._bot_threads) > MAX_BOT_THREADS:
            self._bot_threads.popitem(last=False)

    def is_bot_thread(self, thread: str | None) -> bool:
        if not thread or thread not in self._bot_threads:
            return False
        self._bot_threads.move_to_end(thread)
        return True
