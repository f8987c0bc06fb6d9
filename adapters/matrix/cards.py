"""One open card's state: its events, and the answers given so far. No I/O.

Two kinds of card:

- **forms** (`Card.form`): the fields laid out by `layout.plan` (typed lines, reactions, polls, lists) and the
  answers in a `formstate.FormState`;
- **approvals and links** (`Card.dialog`): answered on the card itself with ✅ / ❌ / 🚫, with
  `bridge.text.questions.Dialog` (the same state machine as the console) asking fields one at a time in the thread when
  a person replies `edit`.

Everything needed to find the card again after a restart is in `ref_data()` (stored by the core with the card): the
room, the card's first event, the thread its replies go to, and which poll or list asks which field.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from adapters.matrix.formstate import SKIP_WORDS, FormState
from adapters.matrix.layout import Layout, Slot, plan
from bridge.door.model import CardRef, Interaction, Kind
from bridge.text.questions import Dialog, Step


def is_form(interaction: Interaction) -> bool:
    """Forms are filled in; approvals, links (and forms the host lets be accepted as shown) are answered on the
    card."""
    return interaction.kind is Kind.FORM and not interaction.quick_accept


@dataclass
class FormParts:
    layout: Layout
    state: FormState
    polls: dict[str, Slot] = dataclasses.field(default_factory=dict)
    """Poll start event id -> the field it asks."""
    lists: dict[str, Slot] = dataclasses.field(default_factory=dict)
    """List message event id -> the multi-select it asks."""
    reask: str | None = None
    """The latest re-ask, while what it asks is still open (edited when the form ends)."""
    pill: bool = False
    """Whether the bot has put its ✅ on the card (it does once the form can be sent)."""


@dataclass
class Card:
    interaction: Interaction
    room_id: str
    root: str
    """The card's first event: edited to show progress and the outcome."""
    thread: str
    """The thread its replies go to (the conversation's thread, or the card itself)."""
    form: FormParts | None = None
    dialog: Dialog | None = None
    latest: str = ""
    """The last event we posted in the thread, for the reply fallback of the next one."""
    summary: str | None = None
    question: str | None = None
    """Approvals: the event of the question being asked now."""
    done: bool = False
    owned: set[str] = dataclasses.field(default_factory=set)
    """Every event id that leads to this card (also replaced questions, re-asks and reactions)."""

    @classmethod
    def new(cls, interaction: Interaction, room_id: str, root: str, thread: str) -> Card:
        if is_form(interaction):
            layout = plan(interaction.form)
            return cls(interaction, room_id, root, thread, form=FormParts(layout, FormState(layout)), latest=root)
        return cls(interaction, room_id, root, thread, dialog=Dialog(interaction), latest=root)

    # -- where events belong -------------------------------------------------------------------------------------

    def ref_data(self) -> dict[str, str]:
        data = {"room": self.room_id, "root": self.root, "thread": self.thread}
        if self.form is not None:
            data["polls"] = json.dumps({e: s.field.name for e, s in self.form.polls.items()})
            data["lists"] = json.dumps({e: s.field.name for e, s in self.form.lists.items()})
        return data

    def events(self) -> set[str]:
        ids = {self.root}
        if self.form is not None:
            ids.update(self.form.polls)
            ids.update(self.form.lists)
        ids.update(e for e in (self.summary, self.question) if e)
        return ids

    def place_of(self, event_id: str) -> int | None:
        """Where reactions to `event_id` answer: 0 on the card itself, n on the n-th list; None for any other event."""
        if event_id == self.root:
            return 0
        if self.form is not None and event_id in self.form.lists:
            return self.form.lists[event_id].place
        return None

    # -- approvals -----------------------------------------------------------------------------------------------

    @property
    def confirming(self) -> bool:
        """Approvals: True when the dialog asks for the final accept / decline / cancel."""
        return self.dialog is None or self.dialog.question().field is None

    def reply(self, text: str) -> Step:
        """Approvals: a reply in the thread, the answer to the current question (or to the summary)."""
        assert self.dialog is not None
        stripped = text.strip()
        if stripped.lower() in SKIP_WORDS and not self.confirming:
            stripped = ""
        return self.dialog.answer(stripped)


def stored_events(ref: CardRef, key: str) -> dict[str, str]:
    """Which poll or list (event id) asks which field (name), as stored in a card's ref."""
    try:
        data: Any = json.loads(ref.data.get(key, "{}"))
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
