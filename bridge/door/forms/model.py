"""The form model: fields a chat can ask for, and answers turned back into content.

Pure logic, no I/O. Every adapter renders the same `Form`: Slack as Block Kit inputs, Matrix as polls and threaded
questions, the console as one prompt per field. Answers are parsed per field (`Field.parse_text` for typed text,
`Field.coerce` for values from native widgets) and every value is checked against its field's part of the schema
(`Field.problem`, jsonschema's format checkers for formats) before it goes back to the server, so what a server
receives has the types its schema asked for. Forms come from an elicitation schema
(`bridge.door.forms.schema.form_from_schema`) or are built by the bridge itself (`approval_form`).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bridge.door.forms.checks import (
    FALSE_WORDS,
    FORMAT_CHECKER,
    TRUE_WORDS,
    format_reason,
    normalise_datetime,
    num,
    shorten_answer,
)

STRING_FORMATS = ("email", "uri", "date", "date-time")


class FieldKind(enum.StrEnum):
    TEXT = "text"
    NUMBER = "number"
    INTEGER = "integer"
    BOOLEAN = "boolean"
    CHOICE = "choice"
    MULTI = "multi"


@dataclass(frozen=True, slots=True)
class Option:
    value: str
    title: str


@dataclass(frozen=True, slots=True)
class Field:
    """One question. `name` is the schema property; `title` and `description` are the server's (untrusted) text."""

    name: str
    kind: FieldKind
    title: str
    description: str = ""
    required: bool = False
    default: Any = None
    has_default: bool = False
    format: str = ""
    min_length: int | None = None
    max_length: int | None = None
    minimum: float | None = None
    maximum: float | None = None
    far_minimum: float | None = None
    far_maximum: float | None = None
    """Bounds beyond any number a person can enter (a 401-digit maximum): not shown or given to widgets, still
    checked."""
    min_items: int | None = None
    max_items: int | None = None
    options: tuple[Option, ...] = ()
    multiline: bool = False
    looks_secret: bool = False
    """The name or text suggests a password, token, key or card number, which the spec forbids in form mode."""
    option_values: frozenset[str] = field(init=False, repr=False, compare=False, default=frozenset())

    def __post_init__(self) -> None:
        object.__setattr__(self, "option_values", frozenset(o.value for o in self.options))

    def hint(self) -> str:
        """A short type hint for text-based adapters: what kind of answer fits, its range, its default."""
        parts: list[str] = []
        if self.kind is FieldKind.TEXT:
            parts.append({"email": "an email address", "uri": "a URL", "date": "a date, YYYY-MM-DD",
                          "date-time": "a date and time, e.g. 2026-01-31T09:30:00Z"}.get(self.format, "text"))
            if self.min_length is not None and self.max_length is not None:
                parts.append(f"{self.min_length}-{self.max_length} characters")
            elif self.min_length is not None:
                parts.append(f"at least {self.min_length} characters")
            elif self.max_length is not None:
                parts.append(f"at most {self.max_length} characters")
        elif self.kind in (FieldKind.NUMBER, FieldKind.INTEGER):
            parts.append("a whole number" if self.kind is FieldKind.INTEGER else "a number")
            if self.minimum is not None and self.maximum is not None:
                parts.append(f"{num(self.minimum)} to {num(self.maximum)}")
            elif self.minimum is not None:
                parts.append(f"at least {num(self.minimum)}")
            elif self.maximum is not None:
                parts.append(f"at most {num(self.maximum)}")
        elif self.kind is FieldKind.BOOLEAN:
            parts.append("yes or no")
        elif self.kind is FieldKind.CHOICE:
            parts.append("one of the options (number, value or title)")
        else:
            parts.append("one or more options, comma-separated")
            if self.min_items is not None:
                parts.append(f"at least {self.min_items}")
            if self.max_items is not None:
                parts.append(f"at most {self.max_items}")
        if self.default_fits:
            parts.append(f"default: {self.display(self.default)}")
        elif self.has_default:
            parts.append(f"suggested: {self.display(self.default)}" + ("" if self.required else ", optional"))
        elif not self.required:
            parts.append("optional")
        return ", ".join(parts)

    @property
    def default_fits(self) -> bool:
        """There is a default, and it is an answer this field takes. A server may send one it does not (a date as
        an ISO week date, `2026-W01-1`): it is then only suggested, never taken for an empty answer."""
        return self.has_default and not self.problem(self.default)

    def display(self, value: Any) -> str:
        """A value as a person reads it: option titles instead of codes, yes/no for booleans."""
        if value is None:
            return "(none)"
        if self.kind is FieldKind.BOOLEAN:
            return "yes" if value else "no"
        if self.kind is FieldKind.CHOICE:
            return self.title_of(str(value))
        if self.kind is FieldKind.MULTI and isinstance(value, list):
            return ", ".join(self.title_of(str(v)) for v in value) or "(none)"
        if isinstance(value, float):
            return num(value)
        return str(value)

    def title_of(self, value: str) -> str:
        for option in self.options:
            if option.value == value:
                return option.title
        return value

    def option_for(self, text: str) -> Option | None:
        """Match an answer to an option by its 1-based number, its value, or its title (case-insensitive)."""
        token = text.strip()
        if token.isascii() and token.isdigit() and 1 <= int(token) <= len(self.options):
            return self.options[int(token) - 1]
        for option in self.options:
            if token == option.value:
                return option
        folded = token.casefold()
        for option in self.options:
            if folded in (option.value.casefold(), option.title.casefold()):
                return option
        return None

    def parse_text(self, text: str) -> Any:
        """Parse a typed answer into the JSON value this field needs.

        An empty answer means "no answer": the caller decides between the default and skipping. Raises
        `ValueError` with a message fit to show a person when the text cannot be this field's value.
        """
        raw = text.strip()
        if self.kind is FieldKind.TEXT:
            value: Any = text.strip("\r\n") if self.multiline else raw
            if self.format == "date-time":
                value = normalise_datetime(raw)
            self.check(value)
            return value
        if self.kind is FieldKind.BOOLEAN:
            folded = raw.casefold()
            if folded in TRUE_WORDS:
                return True
            if folded in FALSE_WORDS:
                return False
            raise ValueError("answer yes or no")
        if self.kind in (FieldKind.NUMBER, FieldKind.INTEGER):
            return self.coerce(raw)
        if self.kind is FieldKind.CHOICE:
            option = self.option_for(raw)
            if option is None:
                raise ValueError(f"{shorten_answer(raw)!r} is not one of the options: {self._how_to_pick()}")
            return option.value
        values: list[str] = []
        for part in (p for p in raw.split(",") if p.strip()):
            option = self.option_for(part)
            if option is None:
                raise ValueError(f"{shorten_answer(part.strip())!r} is not one of the options: {self._how_to_pick()}")
            if option.value not in values:
                values.append(option.value)
        self.check(values)
        return values

    def _how_to_pick(self) -> str:
        return f"enter a number from 1 to {len(self.options)}, or an option's value or title"

    def coerce(self, value: Any) -> Any:
        """Turn a widget's value (often a string) into this field's JSON type, then check it."""
        if self.kind in (FieldKind.NUMBER, FieldKind.INTEGER) and isinstance(value, str):
            text = value.strip()
            try:
                number = float(text)
            except ValueError:
                raise ValueError(f"{text!r} is not a number") from None
            if not math.isfinite(number):
                raise ValueError("enter a finite number")
            if self.kind is FieldKind.INTEGER:
                if not number.is_integer():
                    raise ValueError("enter a whole number")
                value = int(number)
            else:
                value = int(number) if number.is_integer() and "." not in text and "e" not in text.lower() else number
        elif self.kind in (FieldKind.NUMBER, FieldKind.INTEGER) and isinstance(value, float) \
                and not math.isfinite(value):
            raise ValueError("enter a finite number")  # JSON has no infinity; the schema check would let it pass
        elif self.kind is FieldKind.INTEGER and isinstance(value, float) and value.is_integer():
            value = int(value)  # a whole number from a numeric widget: the server asked for an integer
        reason = self.problem(value)  # `check`, written out: once per field of every answer
        if reason:
            raise ValueError(reason)
        return value

    def check(self, value: Any) -> None:
        """Validate one value against this field's schema; raise ValueError with a readable reason."""
        reason = self.problem(value)
        if reason:
            raise ValueError(reason)

    def problem(self, value: Any) -> str:
        """Why `value` does not fit this field's schema (`schema()`), or "" when it does.

        The same verdict jsonschema gives for `schema()` (the tests compare the two on generated answers), computed
        directly: building validators per decision cost a quarter of a round trip.
        """
        kind = self.kind
        if kind is FieldKind.TEXT:
            if not isinstance(value, str):
                return "enter text"
            if self.format and not FORMAT_CHECKER.conforms(value, self.format):
                return format_reason(self.format, value)
            if self.min_length is not None and len(value) < self.min_length:
                return f"enter at least {self.min_length} characters"
            if self.max_length is not None and len(value) > self.max_length:
                return f"enter at most {self.max_length} characters"
            return ""
        if kind is FieldKind.NUMBER or kind is FieldKind.INTEGER:
            whole = kind is FieldKind.INTEGER
            if isinstance(value, bool) or not isinstance(value, int | float):
                return "enter a whole number" if whole else "enter a number"
            if isinstance(value, float) and not math.isfinite(value):
                return "enter a finite number"
            if whole and isinstance(value, float) and not value.is_integer():
                return "enter a whole number"
            if self.minimum is not None and value < self.minimum:
                return f"must be at least {num(self.minimum)}"
            if self.maximum is not None and value > self.maximum:
                return f"must be at most {num(self.maximum)}"
            if self.far_minimum is not None and value < self.far_minimum:
                return f"must be at least {num(self.far_minimum)}"
            if self.far_maximum is not None and value > self.far_maximum:
                return f"must be at most {num(self.far_maximum)}"
            return ""
        if kind is FieldKind.BOOLEAN:
            return "" if isinstance(value, bool) else "answer yes or no"
        if kind is FieldKind.CHOICE:
            return "" if isinstance(value, str) and self._is_option(value) else "not one of the options"
        if not isinstance(value, list):
            return "choose from the options"
        if not all(isinstance(v, str) and self._is_option(v) for v in value):
            return "not one of the options"
        if len(set(value)) != len(value):
            return "choose each option once"
        if self.min_items is not None and len(value) < self.min_items:
            return f"choose at least {self.min_items}"
        if self.max_items is not None and len(value) > self.max_items:
            return f"choose at most {self.max_items}"
        return ""

    def _is_option(self, value: str) -> bool:
        return value in self.option_values

    def schema(self) -> dict[str, Any]:
        """This field as a JSON Schema property (the subset), used for validation."""
        if self.kind is FieldKind.TEXT:
            s: dict[str, Any] = {"type": "string"}
            if self.format:
                s["format"] = self.format
            if self.min_length is not None:
                s["minLength"] = self.min_length
            if self.max_length is not None:
                s["maxLength"] = self.max_length
            return s
        if self.kind in (FieldKind.NUMBER, FieldKind.INTEGER):
            s = {"type": "integer" if self.kind is FieldKind.INTEGER else "number"}
            low = self.minimum if self.minimum is not None else self.far_minimum
            high = self.maximum if self.maximum is not None else self.far_maximum
            if low is not None:
                s["minimum"] = low
            if high is not None:
                s["maximum"] = high
            return s
        if self.kind is FieldKind.BOOLEAN:
            return {"type": "boolean"}
        values = [o.value for o in self.options]
        if self.kind is FieldKind.CHOICE:
            return {"type": "string", "enum": values}
        s = {"type": "array", "items": {"type": "string", "enum": values}, "uniqueItems": True}
        if self.min_items is not None:
            s["minItems"] = self.min_items
        if self.max_items is not None:
            s["maxItems"] = self.max_items
        return s


@dataclass(frozen=True, slots=True)
class FormErrors:
    """Per-field reasons an answer was refused; `general` for problems not tied to one field."""

    fields: Mapping[str, str] = field(default_factory=dict)
    general: str = ""

    def __bool__(self) -> bool:
        return bool(self.fields or self.general)

    def summary(self) -> str:
        parts = [f"{name}: {reason}" for name, reason in self.fields.items()]
        if self.general:
            parts.append(self.general)
        return "; ".join(parts)


@dataclass(frozen=True, slots=True)
class Form:
    """The fields of one elicitation, in schema order, plus the schema they came from."""

    fields: tuple[Field, ...] = ()
    schema: Mapping[str, Any] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.fields

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)

    def defaults(self) -> dict[str, Any]:
        """The pre-filled values: what accepting the form untouched would send."""
        return {f.name: f.default for f in self.fields if f.has_default}

    def validate(self, content: Mapping[str, Any]) -> tuple[dict[str, Any], FormErrors]:
        """Check a complete answer: coerce and check each value (`Field.problem`), drop unknown keys.

        Returns the content to send and no errors, or partial content and the errors to show. `None` values mean
        "not answered" and are left out (the 2026 schema allows null, but servers reject it more often than not).
        """
        out: dict[str, Any] = {}
        errors: dict[str, str] = {}
        for f in self.fields:
            if f.name not in content or content[f.name] is None or content[f.name] == "":
                if f.required:
                    errors[f.name] = "this field is required"
                continue
            try:
                out[f.name] = f.coerce(content[f.name])
            except ValueError as exc:
                errors[f.name] = str(exc)
        return out, FormErrors(fields=errors)

    def names(self) -> list[str]:
        return [f.name for f in self.fields]

    @property
    def secret_fields(self) -> list[Field]:
        return [f for f in self.fields if f.looks_secret]


def approval_form(fields: Sequence[Field]) -> Form:
    """A form the host builds itself (edit a prompt, pick roots): same rendering and validation as elicitation."""
    properties = {f.name: {**f.schema(), "title": f.title, **({"default": f.default} if f.has_default else {})}
                  for f in fields}
    schema = {"type": "object", "properties": properties, "required": [f.name for f in fields if f.required]}
    return Form(fields=tuple(fields), schema=schema)
