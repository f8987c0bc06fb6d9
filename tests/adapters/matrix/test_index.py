"""The card index on its own: cards found from their events and threads, only in their room, forgotten when done."""

from __future__ import annotations

import dataclasses

from adapters.matrix.cards import Card
from adapters.matrix.index import MAX_BOT_THREADS, CardIndex
from bridge.door.forms import Form
from tests.adapters.matrix.test_render import interaction

ROOM = "!room"  # the channel of test_render's interactions


def card(interaction_id: str, root: str, thread: str | None = None) -> Card:
    i = dataclasses.replace(interaction(Form()), id=interaction_id)
    return Card.new(i, ROOM, root, thread or root)


def test_a_card_is_found_from_its_events_only_in_its_own_room() -> None:
    index = CardIndex()
    first = card("c1", "$root1")
    index.add(first)
    index.own(first, "$question1")
    assert index.card_of(ROOM, "$root1") is first and index.card_of(ROOM, "$question1") is first
    assert index.card_of("!other:example.org", "$root1") is None
    assert index.card_of(ROOM, "$unknown") is None and index.card_of(ROOM, None) is None


def test_the_oldest_open_card_of_a_thread_answers_first() -> None:
    index = CardIndex()
    older, newer = card("c1", "$a", "$thread"), card("c2", "$b", "$thread")
    index.add(older)
    index.add(newer)
    assert index.card_in_thread(ROOM, "$thread") is older
    older.done = True
    assert index.card_in_thread(ROOM, "$thread") is newer
    assert index.card_in_thread("!other:example.org", "$thread") is None


def test_a_finished_card_is_forgotten_everywhere() -> None:
    index = CardIndex()
    c = card("c1", "$root", "$thread")
    index.add(c)
    index.own(c, "$summary")
    assert index.pop("c1") is c and c.done
    assert index.card_of(ROOM, "$root") is None and index.card_of(ROOM, "$summary") is None
    assert index.card_in_thread(ROOM, "$thread") is None and index.cards() == []
    assert index.pop("c1") is None
    assert index.is_bot_thread("$thread")  # the bot still spoke there: replies stay addressed to it


def test_bot_threads_are_remembered_up_to_a_bound() -> None:
    index = CardIndex()
    assert not index.is_bot_thread("$t0") and not index.is_bot_thread(None)
    for n in range(MAX_BOT_THREADS + 1):
        index.remember_thread(f"$t{n}")
    assert not index.is_bot_thread("$t0") and index.is_bot_thread(f"$t{MAX_BOT_THREADS}")
