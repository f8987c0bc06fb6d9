"""One open card's state: its events, its polls and their votes, and the text dialog in its thread. No I/O.

Choice fields of a form are polls; every other field is a question in the thread, asked one at a time by
`bridge.dialog.Dialog` (the same state machine as the console). Poll votes are fed into the dialog's answers as they
come, so the summary and the accepted content always show the latest vote of someone who may decide.

Everything needed to find the card again after a restart is in `ref_data()` (stored by the core with the card):
the room, the card's first event, the thread its questions go to, and which poll asks which field.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from adapters.matrix.render import KEYCAPS, poll_options, poll_value, pollable
from bridge.dialog import Dialog, Step
from bridge.forms import Field, FieldKind
from bridge.model import CardRef, Interaction, Kind

SKIP_WORDS = frozenset({"skip", "-", "default", "(empty)"})
"""Matrix has no empty message: these stand for one (keep the default, leave an optional field empty)."""


@dataclass
class Poll:
    event_id: str
    field: Field
    votes: dict[str, tuple[int, Any]] = dataclasses.field(default_factory=dict)
    """Latest counted vote per person: (server timestamp, value)."""


@dataclass
class Card:
    interaction: Interaction
    room_id: str
    root: str
    """The card's first event: edited to show the outcome."""
    thread: str
    """The thread its questions, polls and summary go to (the conversation's thread, or the card itself)."""
    dialog: Dialog
    polls: dict[str, Poll] = dataclasses.field(default_factory=dict)
    latest: str = ""
    """The last event we posted in the thread, for the reply fallback of the next one."""
    summary: str | None = None
    question: str | None = None
    """The event of the question being asked now."""
    done: bool = False
    owned: set[str] = dataclasses.field(default_factory=set)
    """Every event id that leads to this card (also replaced questions and summaries): forgotten when it ends."""

    @classmethod
    def new(cls, interaction: Interaction, room_id: str, root: str, thread: str) -> Card:
        preset = {f.name: (f.default if f.has_default else None) for f in poll_fields(interaction)}
        return cls(interaction, room_id, root, thread, Dialog(interaction, preset), latest=root)

    # -- where events belong -------------------------------------------------------------------------------------

    def ref_data(self) -> dict[str, str]:
        return {"room": self.room_id, "root": self.root, "thread": self.thread,
                "polls": json.dumps({p.event_id: p.field.name for p in self.polls.values()})}

    def events(self) -> set[str]:
        ids = {self.root, *self.polls}
        ids.update(e for e in (self.summary, self.question) if e)
        return ids

    @property
    def confirming(self) -> bool:
        """True when the dialog asks for the final accept / decline / cancel."""
        return self.dialog.question().field is None

    @property
    def root_is_summary(self) -> bool:
        """Approvals and URL cards are answered on the card itself; forms get a separate summary."""
        return self.interaction.kind is not Kind.FORM or self.interaction.quick_accept

    # -- inputs --------------------------------------------------------------------------------------------------

    def reply(self, text: str) -> Step:
        """A reply in the thread: the answer to the current question (or to the summary)."""
        stripped = text.strip()
        if stripped.lower() in SKIP_WORDS and not self.confirming:
            stripped = ""
        return self.dialog.answer(stripped)

    def vote(self, poll: Poll, sender: str, timestamp: int, value: Any) -> bool:
        """Count a vote (already checked to come from someone who may decide). True when the answer changed."""
        previous = poll.votes.get(sender)
        if previous is not None and previous[0] > timestamp:
            return False  # MSC3381: only a person's latest response counts
        poll.votes[sender] = (timestamp, value)
        return self._recount(poll)

    def keycap(self, poll: Poll, sender: str, timestamp: int, key: str) -> bool:
        """A 1️⃣-🔟 reaction on a poll, for clients that cannot vote: picks (or, for a multi-select, adds) an option."""
        if key not in KEYCAPS:
            return False
        n = KEYCAPS.index(key) + 1
        options = poll_options(poll.field)
        if n > len(options):
            return False
        answer = options[n - 1][0]
        if poll.field.kind is FieldKind.MULTI:
            current = self.dialog.answers.get(poll.field.name) or []
            ids = [str(i) for i, o in enumerate(poll.field.options, 1) if o.value in current]
            return self.vote(poll, sender, timestamp, poll_value(poll.field, [*ids, answer]))
        return self.vote(poll, sender, timestamp, poll_value(poll.field, [answer]))

    def poll_reply(self, poll: Poll, sender: str, timestamp: int, text: str) -> str:
        """A reply to a poll with the number(s) of the answer (`skip` withdraws the vote: the default, or empty).
        Returns a reason when it does not fit, else ''."""
        if text.strip().lower() in SKIP_WORDS:
            self.vote(poll, sender, timestamp, None)
            return ""
        try:
            value = poll.field.parse_text(text)
        except ValueError as exc:
            return str(exc)
        self.vote(poll, sender, timestamp, value)
        return ""

    def _recount(self, poll: Poll) -> bool:
        f = poll.field
        latest = max(poll.votes.values(), key=lambda v: v[0], default=None)
        value = latest[1] if latest is not None and latest[1] is not None else (f.default if f.has_default else None)
        changed = self.dialog.answers.get(f.name) != value
        self.dialog.answers[f.name] = value
        return changed

    def poll_for(self, event_id: str) -> Poll | None:
        return self.polls.get(event_id)

    def poll_errors(self, errors: Mapping[str, str]) -> dict[str, str]:
        """The refused fields that are answered by polls (the dialog cannot re-ask those)."""
        names = {p.field.name: p.field.title for p in self.polls.values()}
        return {names[k]: v for k, v in errors.items() if k in names}


def poll_fields(interaction: Interaction) -> list[Field]:
    """Fields asked as polls: the choices of a form. Approvals are answered on the card; their (rare) fields are
    edited as questions."""
    if interaction.kind is not Kind.FORM or interaction.quick_accept:
        return []
    return [f for f in interaction.form.fields if pollable(f)]


def poll_map(ref: CardRef) -> dict[str, str]:
    """Which poll (event id) asks which field (name), as stored in a card's ref."""
    try:
        data = json.loads(ref.data.get("polls", "{}"))
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
