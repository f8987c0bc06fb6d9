"""The door from adapters into the core stays small, and adapters never reason about where a card is held.

With several workers on one store a card is held by one of them; deciding on it, looking it up or checking a person
before a dialog goes through the same `Inbound` methods wherever it is (the core takes a decision to its worker).
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from bridge.door.ports import Inbound

ROOT = Path(__file__).resolve().parent.parent
MAX_METHODS = 8
HELD = re.compile(r"held_here|elsewhere|forward", re.IGNORECASE)
PROTOCOL_TERMS = re.compile(r"ForwardedRoomKey")
"""Matrix's end-to-end encryption event for a room key another device sends: a protocol name, not about cards."""


def _methods(cls: type) -> set[str]:
    return {name for name, value in vars(cls).items()
            if not name.startswith("_") and (inspect.isfunction(value) or isinstance(value, property))}


def test_the_door_has_at_most_eight_methods() -> None:
    methods = _methods(Inbound)
    assert len(methods) <= MAX_METHODS, sorted(methods)
    assert {"handle_message", "decide", "check", "cards", "stop_call"} <= methods


def test_no_adapter_mentions_where_a_card_is_held() -> None:
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
             for path in sorted((ROOT / "adapters").rglob("*.py"))
             for n, line in enumerate(path.read_text("utf-8").splitlines(), 1)
             if HELD.search(PROTOCOL_TERMS.sub("", line))]
    assert found == []
