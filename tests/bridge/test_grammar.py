"""The one helper for plurals and persons (`bridge.text.grammar`), and the sentences that use it."""

from __future__ import annotations

from bridge.text.grammar import acts, count, listing, possessive


def test_count_says_one_thing_and_many_things() -> None:
    assert [count(n, "prompt") for n in (0, 1, 2)] == ["0 prompts", "1 prompt", "2 prompts"]
    assert count(1, "resource") == "1 resource"
    assert count(1, "server") == "1 server"
    assert count(3, "message") == "3 messages"
    assert count(2, "entry", "entries") == "2 entries"


def test_persons() -> None:
    assert acts("you", "wants") == "you want"
    assert acts("You", "has") == "You have"
    assert acts("you", "wants", start=True) == "You want"
    assert acts("ada.lovelace", "wants", start=True) == "ada.lovelace wants"
    assert acts("you", "asks") == "you ask"
    assert acts("you", "reaches") == "you reach"
    assert acts("Alice", "wants") == "Alice wants"
    assert possessive("you") == "your"
    assert possessive("Alice") == "Alice's"
    assert possessive("you", start=True) == "Your"
    assert possessive("ada.lovelace", start=True) == "ada.lovelace's"


def test_listing() -> None:
    assert listing([]) == "none"
    assert listing([], empty="no servers") == "no servers"
    assert listing(["demo"]) == "demo"
    assert listing(["a", "b", "c"]) == "a, b and c"
