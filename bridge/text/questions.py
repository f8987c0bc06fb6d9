"""A card answered by text, one question at a time: the console and Matrix threads both run this.

Pure state machine, no I/O. Each field is asked with its type hint; a wrong answer is re-asked with the reason; an
empty answer takes the default (or skips an optional field); then a summary asks to accept, decline or cancel (or, where
the card offers wider grants, `allow conversation` / `allow channel`).
Fields answered elsewhere (a Matrix poll) are passed in as `preset` and not asked. At any question `!decline` and
`!cancel` end the card at once; at the summary `edit` starts over.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from bridge.door.forms import Field, FieldKind, Option
from bridge.door.model import Action, Interaction, Kind

ACCEPT_WORDS = {"accept", "a", "yes", "y", "ok", "submit", "approve", "done", "send", "✅"}
DECLINE_WORDS = {"decline", "d", "no", "n", "deny", "reject", "❌"}
CANCEL_WORDS = {"cancel", "c", "🚫"}
EDIT_WORDS = {"edit", "e", "back", "change"}


class StepKind(enum.StrEnum):
    ASK = "ask"
    """Show `question` (the next one)."""
    REASK = "reask"
    """The answer was refused: show `message`, then `question` again."""
    DONE = "done"
    """The person decided: send `action` (and `content`) to the core."""


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    hint: str
    field: Field | None = None
    """None for the final accept/decline/cancel question."""
    options: tuple[Option, ...] = ()
    number: int = 0
    total: int = 0


@dataclass(frozen=True, slots=True)
class Step:
    kind: StepKind
    question: Question | None = None
    message: str = ""
    action: Action | None = None
    content: Mapping[str, Any] | None = None
    grant: str = ""
    """With an accept: the wider scope the person allowed (`allow channel`), or ''."""


@dataclass
class Dialog:
    interaction: Interaction
    preset: Mapping[str, Any] = field(default_factory=dict)
    answers: dict[str, Any] = field(default_factory=dict)
    _index: int = 0
    _confirming: bool = False
    _typed: bool = False
    """Whether the person has gone through the fields (else the values shown were filled in for them)."""

    def __post_init__(self) -> None:
        self.answers.update(self.preset)
        # Approvals that can be accepted as shown start at the summary; editing goes through the fields.
        self._confirming = not self._fields() or self.interaction.quick_accept
        if self.interaction.quick_accept:
            self.answers = {**self.interaction.form.defaults(), **self.answers}

    def _fields(self) -> list[Field]:
        return [f for f in self.interaction.form.fields if f.name not in self.preset]

    def start(self) -> Step:
        return Step(StepKind.ASK, self.question())

    def question(self) -> Question:
        fields = self._fields()
        if self._confirming or self._index >= len(fields):
            return self._summary_question()
        f = fields[self._index]
        text = f.title + (f" ({f.description})" if f.description and f.description != f.title else "")
        current = self.answers.get(f.name)
        if current is None:
            hint = f.hint()
        else:
            # Going through the fields again (`edit`): what Enter keeps is the current answer, not the default.
            hint = replace(f, has_default=False, required=True).hint() + f", now: {f.display(current)} (empty keeps it)"
        return Question(text, hint, f, f.options, self._index + 1, len(fields))

    def _summary_question(self) -> Question:
        i = self.interaction
        if i.kind is Kind.URL:
            return Question("Open the link yourself in your browser if you agree.",
                            f"answer {i.accept_label.lower()}, decline or cancel")
        edit = ", edit" if self._fields() and i.required < 2 else ""
        allow = "".join(f", allow {g.scope} ({g.label[len('Allow '):]})" for g in i.grants)
        return Question(f"{i.accept_label}?", f"answer {i.accept_label.lower()}, {i.decline_label.lower()}{edit}"
                                               f"{allow} or cancel")

    def summary_label(self) -> str:
        """What the summary before accepting is: the person's answers, or what will be sent unless they edit it."""
        if self._typed:
            return "Your answers:"
        return "What will be sent (edit to change it):" if self._fields() else "What will be sent:"

    def summary_lines(self) -> list[str]:
        """The answers so far as `title: value` lines (for the summary before accepting)."""
        form = self.interaction.form
        return [f"{f.title}: {f.display(self.answers[f.name])}" for f in form.fields if f.name in self.answers]

    def answer(self, text: str) -> Step:
        stripped = text.strip()
        if stripped.lower() in ("!decline", "!cancel"):
            return self._done("decline" if stripped.lower() == "!decline" else "cancel")
        fields = self._fields()
        if self._confirming or self._index >= len(fields):
            return self._confirm(stripped)
        f = fields[self._index]
        if not stripped:
            if f.name in self.answers:
                pass  # keep the current (pre-filled) value
            elif f.default_fits:
                self.answers[f.name] = f.default
            elif f.required:
                return Step(StepKind.REASK, self.question(), "This one is required.")
        else:
            try:
                self.answers[f.name] = f.parse_text(text)
            except ValueError as exc:
                return Step(StepKind.REASK, self.question(), _sentence(str(exc)))
        self._index += 1
        self._typed = True
        return Step(StepKind.ASK, self.question())

    def _confirm(self, text: str) -> Step:
        word = text.lower().rstrip(".!")
        grant = next((g.scope for g in self.interaction.grants if word == f"allow {g.scope}"), "")
        if word in ACCEPT_WORDS or word == self.interaction.accept_label.lower() or grant:
            content = dict(self.answers) if not self.interaction.form.empty else None
            return Step(StepKind.DONE, action="accept", content=content, grant=grant)
        if word in DECLINE_WORDS or word == self.interaction.decline_label.lower():
            return self._done("decline")
        if word in CANCEL_WORDS:
            return self._done("cancel")
        if word in EDIT_WORDS and self._fields() and self.interaction.required < 2:
            self._index = 0
            self._confirming = False
            return Step(StepKind.ASK, self.question())
        return Step(StepKind.REASK, self.question(), f"Please answer {self._summary_question().hint[len('answer '):]}.")

    def _done(self, action: Action, content: Mapping[str, Any] | None = None) -> Step:
        return Step(StepKind.DONE, action=action, content=content)

    def rejected(self, errors: Mapping[str, str]) -> Step:
        """The core refused the whole answer (cross-field validation): go back to the first field with an error."""
        names = [f.name for f in self._fields()]
        wrong = [n for n in names if n in errors]
        self._index = names.index(wrong[0]) if wrong else 0
        self._confirming = False
        message = "; ".join(f"{n}: {e}" for n, e in errors.items()) or "The answer was not accepted."
        return Step(StepKind.REASK, self.question(), message)


def option_lines(options: Iterable[Option]) -> list[str]:
    """Numbered options: `1. Superman (hero-1)`; the value is shown only when it differs from the title."""
    return [f"{n}. {o.title}" + (f" ({o.value})" if o.value != o.title else "") for n, o in enumerate(options, 1)]


def is_choice(f: Field) -> bool:
    return f.kind in (FieldKind.BOOLEAN, FieldKind.CHOICE, FieldKind.MULTI)


def _sentence(text: str) -> str:
    text = text.strip()
    return (text[:1].upper() + text[1:]).rstrip(".") + "."
