"""The answers of one form card as they come in: poll votes, reactions and their removal, and replies. Pure.

Every answer sets a field's value with the server time of the event that gave it, and the latest one wins (MSC3381
counts only a person's latest vote; the same rule makes a later reply line override an earlier reaction, and the
other way round). A field nobody answered has its default, and only its default: picks on a multi-select replace
the default, never add to it.

Reactions are kept by event id, so that the redaction Element sends when a person taps their reaction again takes
exactly that pick away; the field's value is then recomputed from that person's remaining reactions.

A reply is one line per question, either in the order the card lists them (only the questions still waiting take
lines: the first reply answers all, a later one only what failed or was left out) or numbered (`3: ada@example.org`,
any field by its number). Lines that do not fit are kept as failures until a later line fixes them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from adapters.matrix.layout import KEYCAPS, NO, YES, Layout, Route, Slot
from bridge.door.forms import Field, FieldKind, Form
from bridge.door.model import Action

SKIP_WORDS = frozenset({"-", "skip", "default", "(empty)", "–", "—"})
"""Matrix has no empty message: these stand for one (keep the default, leave an optional field empty)."""
SEND_WORDS = frozenset({"send", "submit", "✅"})
"""A reply that sends the form."""
SEND_WHEN_ANSWERED = frozenset({"accept", "done", "ok"})
"""Also sends it, but only when no typed question waits (else they are taken as an answer)."""
_NUMBERED = re.compile(r"^\s*#?(\d{1,6})\s*(?:[.:)=]\s+|[:)=](?=\D))(.*)$")
"""`3: ada@example.org`, `3. Ada`, `10) 2`: a separator, then a space or a non-digit (so `12:30` and `2.5` are
answers, not numbers)."""


@dataclass(frozen=True, slots=True)
class Given:
    ts: int
    value: Any
    """The field's JSON value; None: nothing given (the default applies)."""


@dataclass(frozen=True, slots=True)
class Pick:
    """One reaction that answers a field: who, which field, what it means."""

    sender: str
    number: int
    key: str
    ts: int


@dataclass(frozen=True, slots=True)
class Reply:
    """What a reply did. `command`: the whole reply was send / !decline / !cancel."""

    command: Action | None = None
    taken: tuple[int, ...] = ()
    failed: Mapping[int, str] = field(default_factory=dict)
    problem: str = ""
    """Why nothing in the reply was used (for example more lines than questions)."""


@dataclass
class FormState:
    layout: Layout
    values: dict[str, Given] = field(default_factory=dict)
    answered: set[int] = field(default_factory=set)
    """Line questions answered (a value, or a skip)."""
    failed: dict[int, str] = field(default_factory=dict)
    """Line answers that did not fit, by field number, until a later answer fixes them."""
    picks: dict[str, Pick] = field(default_factory=dict)
    """Reactions that answer fields, by their event id (so that their redaction finds them)."""

    # -- setting values ------------------------------------------------------------------------------------------

    def set(self, slot: Slot, ts: int, value: Any) -> bool:
        """Give a field a value at server time `ts` (older than what it has: ignored). True when the value changed."""
        name = slot.field.name
        current = self.values.get(name)
        if current is not None and current.ts > ts:
            return False
        self.values[name] = Given(ts, value)
        return current is None or current.value != value

    def vote(self, slot: Slot, ts: int, answer_ids: tuple[str, ...]) -> bool:
        """A poll response: the first answer id (Element sends one per tap), "none" to leave the field empty. An
        unknown id spoils the vote (MSC3381), which then counts as no vote."""
        return self.set(slot, ts, poll_value(slot.field, answer_ids))

    def react(self, event_id: str, sender: str, place: int, key: str, ts: int) -> Slot | None:
        """A reaction on the card (`place` 0) or on a list message: the field it answers, or None when the key
        answers nothing there."""
        slot = self.reaction_slot(place, key)
        if slot is None:
            return None
        self.picks[event_id] = Pick(sender, slot.number, key, ts)
        self._recount(slot, sender, ts)
        return slot

    def unreact(self, event_id: str, ts: int) -> Slot | None:
        """A reaction was redacted: its pick is gone. The field it answered, or None when it answered none."""
        pick = self.picks.pop(event_id, None)
        if pick is None:
            return None
        slot = self.layout.number(pick.number)
        if slot is None:
            return None
        self._recount(slot, pick.sender, max(ts, pick.ts))
        return slot

    def reaction_slot(self, place: int, key: str) -> Slot | None:
        if key in (YES, NO):
            return self.layout.thumbs() if place == 0 else None
        if key in KEYCAPS:
            slot = self.layout.keycaps_at(place)
            if slot is not None and KEYCAPS.index(key) < len(slot.field.options):
                return slot
        return None

    def _recount(self, slot: Slot, sender: str, ts: int) -> None:
        """The field's value from the reactions `sender` has on it now (the latest reaction for a yes/no)."""
        mine = [p for p in self.picks.values() if p.sender == sender and p.number == slot.number]
        value: Any = None
        if slot.route is Route.THUMBS and mine:
            value = max(mine, key=lambda p: p.ts).key == YES
        elif mine:
            chosen = {KEYCAPS.index(p.key) for p in mine}
            value = [o.value for i, o in enumerate(slot.field.options) if i in chosen]
        self.set(slot, ts, value)

    # -- replies -------------------------------------------------------------------------------------------------

    def pending(self) -> list[Slot]:
        """Line questions still waiting for an answer (never answered, or answered with something that failed)."""
        return [s for s in self.layout.lines if s.number not in self.answered or s.number in self.failed]

    def reply(self, text: str, ts: int) -> Reply:
        stripped = text.strip()
        word = stripped.lower().rstrip(".!")
        if word in ("!decline", "!cancel"):
            return Reply(command="decline" if word == "!decline" else "cancel")
        if "\n" not in stripped and (word in SEND_WORDS or (word in SEND_WHEN_ANSWERED and not self.pending())):
            return Reply(command="accept")
        if "\n" not in stripped and word in ("decline", "cancel") and not self.pending():
            return Reply(command="decline" if word == "decline" else "cancel")
        lines = [line.strip() for line in text.split("\n") if line.strip()]
        if not lines:
            return Reply(problem="That reply is empty.")
        targets = self._targets(lines)
        if isinstance(targets, str):
            return Reply(problem=targets)
        taken: list[int] = []
        failed: dict[int, str] = {}
        for slot, raw in targets:
            try:
                value = parse(slot.field, raw)
            except ValueError as exc:
                failed[slot.number] = sentence(str(exc))
                self.failed[slot.number] = failed[slot.number]
                continue
            self.set(slot, ts, value)
            self.failed.pop(slot.number, None)
            if slot.route is Route.LINE:
                self.answered.add(slot.number)
            taken.append(slot.number)
        return Reply(taken=tuple(taken), failed=failed)

    def _targets(self, lines: list[str]) -> list[tuple[Slot, str]] | str:
        numbered = [_NUMBERED.match(line) for line in lines]
        if all(numbered):
            out: list[tuple[Slot, str]] = []
            for match in numbered:
                assert match is not None
                slot = self.layout.number(int(match.group(1)))
                if slot is None:
                    return f"There is no question {match.group(1)} here (1 to {len(self.layout.slots)})."
                out.append((slot, match.group(2).strip()))
            return out
        lines_slots = self.layout.lines
        if not lines_slots:
            return ("Nothing here is typed: vote in the polls and react to the lists, or answer a question by its "
                    "number (`N: answer`).")
        pending = self.pending()
        if len(lines) <= len(pending):
            return list(zip(pending, lines, strict=False))
        if len(lines) == len(lines_slots):
            return list(zip(lines_slots, lines, strict=True))  # everything answered again
        if not pending:
            return ("Every typed question is answered. To change one, reply `N: answer`; to send, react ✅ or reply "
                    "send.")
        n = len(pending)
        return (f"That reply has {len(lines)} lines, but {n} question{'s are' if n != 1 else ' is'} waiting: send "
                f"one line per question, or change one answer with `N: answer`.")

    # -- reading ---------------------------------------------------------------------------------------------------

    def value(self, slot: Slot) -> Any:
        given = self.values.get(slot.field.name)
        if given is not None and given.value is not None:
            return given.value
        return slot.field.default if slot.field.default_fits else None  # one it refuses is only suggested

    def content(self) -> dict[str, Any]:
        """What accepting now would send: the latest answer of every field, else its default."""
        out: dict[str, Any] = {}
        for slot in self.layout.slots:
            value = self.value(slot)
            if value is not None:
                out[slot.field.name] = value
        return out

    def problems(self, form: Form) -> dict[int, str]:
        """Why the card cannot be sent now, by field number: lines that failed, and what validation refuses."""
        out = dict(self.failed)
        _, errors = form.validate(self.content())
        for name, reason in errors.fields.items():
            slot = self.layout.named(name)
            if slot is not None:
                out.setdefault(slot.number, sentence(reason))
        if errors.general and not out:
            out[0] = sentence(errors.general)
        return dict(sorted(out.items()))


def parse(f: Field, raw: str) -> Any:
    """One answer typed for a field: its value, None for a skip (the default, or empty); ValueError when it does
    not fit (an empty answer to a required field without a default included)."""
    if raw.strip().lower() in SKIP_WORDS or not raw.strip():
        if f.required and not f.default_fits:
            raise ValueError("this one is required")
        return None
    return f.parse_text(raw)


def poll_value(f: Field, answer_ids: tuple[str, ...]) -> Any:
    """A poll response's answer ids as the field's JSON value: None for none, "none", or a spoilt vote."""
    ids = [a for a in answer_ids if isinstance(a, str)]
    if not ids or ids[0] == "none":
        return None
    answer = ids[0]
    if f.kind is FieldKind.BOOLEAN:
        return {"yes": True, "no": False}.get(answer)
    if answer.isdigit() and 1 <= int(answer) <= len(f.options):
        value = f.options[int(answer) - 1].value
        return [value] if f.kind is FieldKind.MULTI else value
    return None


def sentence(text: str) -> str:
    text = text.strip()
    return (text[:1].upper() + text[1:]).rstrip(".") + "." if text else text
