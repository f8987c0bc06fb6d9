"""Where each field of a form card is asked, chosen for a person answering in Element on a phone. Pure.

What Element sends decides the routes (element-web `MPollBody.selectOption` sends one answer per tap and only a
person's latest response counts; a reaction pill toggles: a tap reacts, a second tap redacts the reaction):

- **lines**: text, numbers, dates, and choices too long for a poll or a row of reactions. All of them are listed in
  the card's first message and answered together by one reply, one line per question.
- **thumbs**: one yes/no field is answered on the card itself with 👍 / 👎 (Element's quick reactions, one tap
  after a long press); removing the reaction leaves the field empty again.
- **keycaps**: multi-selects of up to ten options are answered by toggling 1️⃣-🔟 reactions. The card itself carries
  the first one; each other one gets a short list message of its own.
- **polls**: single choices (and further yes/no fields) of up to 20 answers, `max_selections: 1`, which is what
  Element can answer. They go to the room's main timeline: Element shows polls inside threads badly
  (element-web#20282: ended polls stay votable), and Element's own composer offers no polls in threads.

Every route costs events: a poll is two (start and end), a list message two (post and the edit that closes it),
while the card's first message carries its lines and reactions at no extra cost. That is why the card hosts one
yes/no field and one multi-select besides the lines: for server-everything's 13-field form it saves four events.

Fields are numbered in the order a person meets them (lines, the card's reactions, polls, lists); a reply line
`N: answer` reaches any field by its number, for clients that cannot vote or react.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bridge.door.forms import Field, FieldKind, Form

MAX_POLL_ANSWERS = 20
"""MSC3381 truncates answers to 20."""
KEYCAPS = ("1️⃣", "2️⃣", "3️⃣", "4️⃣", "5️⃣", "6️⃣", "7️⃣", "8️⃣", "9️⃣", "🔟")
"""The reactions that pick options 1-10."""
YES, NO = "👍", "👎"


class Route(enum.StrEnum):
    LINE = "line"
    THUMBS = "thumbs"
    KEYCAPS = "keycaps"
    POLL = "poll"


@dataclass(frozen=True, slots=True)
class Slot:
    number: int
    field: Field
    route: Route
    place: int = 0
    """For keycaps: 0 on the card itself, n for the n-th list message; for polls: the poll's index."""

    @property
    def leave_empty(self) -> bool:
        """A poll answer that leaves the field empty: only for optional fields without a default (with a default,
        not voting keeps it; a required field cannot be left empty)."""
        return not self.field.required and not self.field.has_default


def poll_answers(f: Field) -> int:
    base = 2 if f.kind is FieldKind.BOOLEAN else len(f.options)
    return base + (0 if f.required or f.has_default else 1)


def route_of(f: Field) -> Route:
    if f.kind is FieldKind.BOOLEAN:
        return Route.THUMBS
    if f.kind is FieldKind.MULTI and 0 < len(f.options) <= len(KEYCAPS):
        return Route.KEYCAPS
    if f.kind is FieldKind.CHOICE and f.options and poll_answers(f) <= MAX_POLL_ANSWERS:
        return Route.POLL
    return Route.LINE


@dataclass(frozen=True, slots=True)
class Layout:
    slots: tuple[Slot, ...]
    """In display order (which is number order)."""
    _titles: dict[str, dict[str, str]] = field(default_factory=dict, compare=False, repr=False)

    def display(self, f: Field, value: Any) -> str:
        """A value as a person reads it (`Field.display`, with option titles looked up in one dict per field, so
        that showing many picks of a long choice stays linear)."""
        if f.kind not in (FieldKind.CHOICE, FieldKind.MULTI):
            return f.display(value)
        titles = self._titles.get(f.name)
        if titles is None:
            titles = self._titles[f.name] = {o.value: o.title for o in f.options}
        if isinstance(value, list):
            return ", ".join(titles.get(str(v), str(v)) for v in value) or "(none)"
        return "(none)" if value is None else titles.get(str(value), str(value))

    @property
    def lines(self) -> list[Slot]:
        return [s for s in self.slots if s.route is Route.LINE]

    @property
    def on_card(self) -> list[Slot]:
        """Fields answered by reacting to the card itself."""
        return [s for s in self.slots if s.route in (Route.THUMBS, Route.KEYCAPS) and s.place == 0]

    @property
    def polls(self) -> list[Slot]:
        return [s for s in self.slots if s.route is Route.POLL]

    @property
    def lists(self) -> list[Slot]:
        """Multi-selects with a list message of their own."""
        return [s for s in self.slots if s.route is Route.KEYCAPS and s.place > 0]

    def number(self, n: int) -> Slot | None:
        return self.slots[n - 1] if 1 <= n <= len(self.slots) else None

    def named(self, name: str) -> Slot | None:
        for s in self.slots:
            if s.field.name == name:
                return s
        return None

    def thumbs(self) -> Slot | None:
        for s in self.on_card:
            if s.route is Route.THUMBS:
                return s
        return None

    def keycaps_at(self, place: int) -> Slot | None:
        for s in self.slots:
            if s.route is Route.KEYCAPS and s.place == place:
                return s
        return None


def plan(form: Form) -> Layout:
    """The layout of a form's fields (see the module docstring)."""
    lines: list[Field] = []
    thumbs: list[Field] = []
    card_keycaps: list[Field] = []
    polls: list[Field] = []
    lists: list[Field] = []
    for f in form.fields:
        route = route_of(f)
        if route is Route.THUMBS:
            (polls if thumbs else thumbs).append(f)
        elif route is Route.KEYCAPS:
            (lists if card_keycaps else card_keycaps).append(f)
        elif route is Route.POLL:
            polls.append(f)
        else:
            lines.append(f)
    slots: list[Slot] = []

    def add(fields: Sequence[Field], route: Route, places: Sequence[int] | None = None) -> None:
        for i, f in enumerate(fields):
            slots.append(Slot(len(slots) + 1, f, route, places[i] if places else 0))

    add(lines, Route.LINE)
    add(thumbs, Route.THUMBS)
    add(card_keycaps, Route.KEYCAPS)
    add(polls, Route.POLL, list(range(len(polls))))
    add(lists, Route.KEYCAPS, list(range(1, len(lists) + 1)))
    return Layout(tuple(slots))
