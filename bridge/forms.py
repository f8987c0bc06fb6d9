"""Forms: an elicitation `requestedSchema` turned into fields a chat can ask for, and answers turned back into content.

Pure logic, no I/O. Every adapter renders the same `Form`: Slack as Block Kit inputs, Matrix as polls and threaded
questions, the console as one prompt per field. Answers are parsed per field (`Field.parse_text` for typed text,
`Field.coerce` for values from native widgets) and the whole content is validated with jsonschema (format checking
on) before it goes back to the server, so what a server receives has the types its schema asked for.

The schema subset is the one the MCP spec allows (2025-11-25 and 2026-07-28): a flat object of strings (min/max
length, formats email, uri, date, date-time), numbers and integers (min/max), booleans, single-select enums (plain
`enum`, titled `oneOf`, legacy `enumNames`) and multi-select arrays (`items.enum`, `items.anyOf`, min/maxItems).
Anything else raises `UnsupportedSchema` with the reason, which the host sends back as -32602.
"""

from __future__ import annotations

import datetime as _dt
import enum
import functools
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import jsonschema
from jsonschema import Draft202012Validator, FormatChecker

from bridge.errors import UnsupportedSchema

STRING_FORMATS = ("email", "uri", "date", "date-time")
_FORMAT_CHECKER = FormatChecker()
_EMAIL = re.compile(r"^[^@\s]+@[^@\s.]+(\.[^@\s.]+)+$")


@_FORMAT_CHECKER.checks("email")
def _is_email(value: object) -> bool:
    """jsonschema's own email check only looks for an "@"; a chat form should catch `ada@` and `ada@example`."""
    return not isinstance(value, str) or bool(_EMAIL.match(value))

_SECRET_WORDS = re.compile(
    r"pass(word|wd|phrase)?|secret|token|api[_\- ]?key|apikey|private[_\- ]?key|credential|"
    r"card[_\- ]?(number|no)|cvv|cvc|\bpin\b|ssn|social[_\- ]?security|iban",
    re.IGNORECASE,
)
_TRUE = {"y", "yes", "true", "t", "1", "on"}
_FALSE = {"n", "no", "false", "f", "0", "off"}

_ARRAYS_ONLY = "{where}: arrays are only allowed as multi-select enums (items.enum or items.anyOf)"
_ALLOWED_TOP = {"type", "properties", "required", "$schema", "title", "description", "additionalProperties"}
_ALLOWED_COMMON = {"type", "title", "description", "default"}


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
    min_items: int | None = None
    max_items: int | None = None
    options: tuple[Option, ...] = ()
    multiline: bool = False
    looks_secret: bool = False
    """The name or text suggests a password, token, key or card number, which the spec forbids in form mode."""

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
                parts.append(f"{_num(self.minimum)} to {_num(self.maximum)}")
            elif self.minimum is not None:
                parts.append(f"at least {_num(self.minimum)}")
            elif self.maximum is not None:
                parts.append(f"at most {_num(self.maximum)}")
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
        if self.has_default:
            parts.append(f"default: {self.display(self.default)}")
        elif not self.required:
            parts.append("optional")
        return ", ".join(parts)

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
            return _num(value)
        return str(value)

    def title_of(self, value: str) -> str:
        for option in self.options:
            if option.value == value:
                return option.title
        return value

    def option_for(self, text: str) -> Option | None:
        """Match an answer to an option by its 1-based number, its value, or its title (case-insensitive)."""
        token = text.strip()
        if token.isdigit() and 1 <= int(token) <= len(self.options):
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
                value = _normalise_datetime(raw)
            self.check(value)
            return value
        if self.kind is FieldKind.BOOLEAN:
            folded = raw.casefold()
            if folded in _TRUE:
                return True
            if folded in _FALSE:
                return False
            raise ValueError("answer yes or no")
        if self.kind in (FieldKind.NUMBER, FieldKind.INTEGER):
            return self.coerce(raw)
        if self.kind is FieldKind.CHOICE:
            option = self.option_for(raw)
            if option is None:
                raise ValueError(f"{raw!r} is not one of the options")
            return option.value
        values: list[str] = []
        for part in (p for p in raw.split(",") if p.strip()):
            option = self.option_for(part)
            if option is None:
                raise ValueError(f"{part.strip()!r} is not one of the options")
            if option.value not in values:
                values.append(option.value)
        self.check(values)
        return values

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
        self.check(value)
        return value

    def check(self, value: Any) -> None:
        """Validate one value against this field's schema; raise ValueError with a readable reason."""
        error = jsonschema.exceptions.best_match(_validator(self.schema()).iter_errors(value))
        if error is not None:
            raise ValueError(_friendly(error, self))

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
            if self.minimum is not None:
                s["minimum"] = self.minimum
            if self.maximum is not None:
                s["maximum"] = self.maximum
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
        """Check a complete answer: coerce each value, drop unknown keys, then validate against the whole schema.

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
        if not errors and self.schema:
            for error in _validator(dict(self.schema)).iter_errors(out):
                name = str(error.path[0]) if error.path else _missing_name(error)
                if name:
                    errors.setdefault(name, _friendly(error, self.field(name) if name in self.names() else None))
                else:
                    return out, FormErrors(general=error.message)
        return out, FormErrors(fields=errors)

    def names(self) -> list[str]:
        return [f.name for f in self.fields]

    @property
    def secret_fields(self) -> list[Field]:
        return [f for f in self.fields if f.looks_secret]


def form_from_schema(schema: Mapping[str, Any]) -> Form:
    """Build a `Form` from an elicitation `requestedSchema`.

    Forms are immutable, so one is built once per distinct schema: servers ask the same form again and again, and
    checking a schema against the JSON Schema metaschema costs milliseconds.

    Raises:
        UnsupportedSchema: the schema is outside the restricted subset; the message says which part and why.
    """
    if not isinstance(schema, Mapping):
        raise UnsupportedSchema("requestedSchema must be an object")
    try:
        key = json.dumps(schema)  # key order is field order, so it stays part of the key
    except (TypeError, ValueError):
        raise UnsupportedSchema("requestedSchema must be plain JSON") from None
    return _cached_form(key)


@functools.lru_cache(maxsize=256)
def _cached_form(key: str) -> Form:
    return _build_form(json.loads(key))


def _build_form(schema: Mapping[str, Any]) -> Form:
    if not isinstance(schema, Mapping):
        raise UnsupportedSchema("requestedSchema must be an object")
    if schema.get("type") != "object":
        raise UnsupportedSchema("requestedSchema must have type 'object'")
    extra = set(schema) - _ALLOWED_TOP
    if extra:
        raise UnsupportedSchema(f"requestedSchema has unsupported keywords: {', '.join(sorted(extra))}")
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping):
        raise UnsupportedSchema("requestedSchema.properties must be an object")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise UnsupportedSchema("requestedSchema.required must be a list of property names")
    unknown = [r for r in required if r not in properties]
    if unknown:
        raise UnsupportedSchema(f"required names unknown properties: {', '.join(unknown)}")
    fields = tuple(_field(str(name), prop, str(name) in required) for name, prop in properties.items())
    try:
        Draft202012Validator.check_schema(dict(schema))
    except jsonschema.SchemaError as exc:
        raise UnsupportedSchema(f"requestedSchema is not valid JSON Schema: {exc.message}") from None
    return Form(fields=fields, schema=dict(schema))


def _field(name: str, prop: Any, required: bool) -> Field:
    where = f"property {name!r}"
    if not isinstance(prop, Mapping):
        raise UnsupportedSchema(f"{where} must be an object")
    kind_name = prop.get("type")
    title = _text(prop.get("title"), where, "title") or name
    description = _text(prop.get("description"), where, "description")
    has_default = "default" in prop
    default = prop.get("default")
    looks_secret = bool(_SECRET_WORDS.search(f"{name} {title} {description}"))
    base = Field(name=name, kind=FieldKind.TEXT, title=title, description=description, required=required,
                 default=default, has_default=has_default, looks_secret=looks_secret)

    if kind_name == "string" and ("enum" in prop or "oneOf" in prop):
        _only(prop, where, _ALLOWED_COMMON | {"enum", "enumNames", "oneOf"})
        options = _options(prop, where)
        if has_default and default not in [o.value for o in options]:
            raise UnsupportedSchema(f"{where}: default {default!r} is not one of the options")
        return replace(base, kind=FieldKind.CHOICE, options=options)
    if kind_name == "string":
        _only(prop, where, _ALLOWED_COMMON | {"minLength", "maxLength", "format"})
        fmt = prop.get("format", "")
        if fmt and fmt not in STRING_FORMATS:
            raise UnsupportedSchema(
                f"{where}: format {fmt!r} is not supported (use one of {', '.join(STRING_FORMATS)})")
        min_length = _int(prop, "minLength", where)
        max_length = _int(prop, "maxLength", where)
        if has_default and not isinstance(default, str):
            raise UnsupportedSchema(f"{where}: default must be a string")
        return replace(base, format=fmt, min_length=min_length, max_length=max_length,
                       multiline=(max_length or 0) > 200 or (max_length is None and not fmt and len(description) > 80))
    if kind_name in ("number", "integer"):
        _only(prop, where, _ALLOWED_COMMON | {"minimum", "maximum"})
        minimum = _number(prop, "minimum", where)
        maximum = _number(prop, "maximum", where)
        if has_default and (isinstance(default, bool) or not isinstance(default, int | float)):
            raise UnsupportedSchema(f"{where}: default must be a number")
        kind = FieldKind.INTEGER if kind_name == "integer" else FieldKind.NUMBER
        return replace(base, kind=kind, minimum=minimum, maximum=maximum)
    if kind_name == "boolean":
        _only(prop, where, _ALLOWED_COMMON)
        if has_default and not isinstance(default, bool):
            raise UnsupportedSchema(f"{where}: default must be true or false")
        return replace(base, kind=FieldKind.BOOLEAN)
    if kind_name == "array":
        _only(prop, where, _ALLOWED_COMMON | {"items", "minItems", "maxItems", "uniqueItems"})
        items = prop.get("items")
        if not isinstance(items, Mapping):
            raise UnsupportedSchema(_ARRAYS_ONLY.format(where=where))
        if "anyOf" in items:
            _only(items, f"{where}.items", {"anyOf", "type"})
            options = _titled(items["anyOf"], f"{where}.items.anyOf")
        elif "enum" in items and items.get("type", "string") == "string":
            _only(items, f"{where}.items", {"enum", "type"})
            options = _plain(items["enum"], None, f"{where}.items.enum")
        else:
            raise UnsupportedSchema(_ARRAYS_ONLY.format(where=where))
        values = [o.value for o in options]
        if has_default and (not isinstance(default, list) or any(v not in values for v in default)):
            raise UnsupportedSchema(f"{where}: default must be a list of the options")
        return replace(base, kind=FieldKind.MULTI, options=options, min_items=_int(prop, "minItems", where),
                       max_items=_int(prop, "maxItems", where))
    if kind_name is None:
        raise UnsupportedSchema(f"{where} has no type")
    raise UnsupportedSchema(f"{where}: type {kind_name!r} is not supported in elicitation forms (nested objects and "
                            "free arrays are outside the spec's subset)")


def _options(prop: Mapping[str, Any], where: str) -> tuple[Option, ...]:
    if "oneOf" in prop:
        return _titled(prop["oneOf"], f"{where}.oneOf")
    names = prop.get("enumNames")
    return _plain(prop["enum"], names, f"{where}.enum")


def _plain(values: Any, names: Any, where: str) -> tuple[Option, ...]:
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        raise UnsupportedSchema(f"{where} must be a non-empty list of strings")
    if names is not None and (not isinstance(names, list) or len(names) != len(values)):
        raise UnsupportedSchema(f"{where}: enumNames must list one title per value")
    if len(set(values)) != len(values):
        raise UnsupportedSchema(f"{where} has duplicate values")
    titles = [str(n) for n in names] if names is not None else values
    return tuple(Option(v, t) for v, t in zip(values, titles, strict=True))


def _titled(entries: Any, where: str) -> tuple[Option, ...]:
    if not isinstance(entries, list) or not entries:
        raise UnsupportedSchema(f"{where} must be a non-empty list of {{const, title}}")
    options: list[Option] = []
    for entry in entries:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("const"), str):
            raise UnsupportedSchema(f"{where}: every entry needs a string const")
        options.append(Option(entry["const"], str(entry.get("title", entry["const"]))))
    if len({o.value for o in options}) != len(options):
        raise UnsupportedSchema(f"{where} has duplicate values")
    return tuple(options)


def _only(prop: Mapping[str, Any], where: str, allowed: set[str]) -> None:
    extra = set(prop) - allowed
    if extra:
        raise UnsupportedSchema(f"{where}: unsupported keywords {', '.join(sorted(extra))}")


def _text(value: Any, where: str, key: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise UnsupportedSchema(f"{where}: {key} must be a string")
    return value


def _int(prop: Mapping[str, Any], key: str, where: str) -> int | None:
    value = prop.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UnsupportedSchema(f"{where}: {key} must be a non-negative integer")
    return value


def _number(prop: Mapping[str, Any], key: str, where: str) -> float | None:
    value = prop.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UnsupportedSchema(f"{where}: {key} must be a number")
    return value


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


def _normalise_datetime(text: str) -> str:
    """Accept `YYYY-MM-DD HH:MM[:SS]` with a zone as well as strict RFC 3339, and send RFC 3339."""
    candidate = text.replace(" ", "T", 1) if "T" not in text and " " in text else text
    try:
        parsed = _dt.datetime.fromisoformat(candidate.replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        return text  # the format check explains what is wrong
    if parsed.tzinfo is None:
        raise ValueError("add a time zone, e.g. 2026-01-31T09:30:00Z or +01:00")
    return parsed.isoformat().replace("+00:00", "Z")


def _validator(schema: dict[str, Any]) -> Draft202012Validator:
    return Draft202012Validator(schema, format_checker=_FORMAT_CHECKER)


def _missing_name(error: jsonschema.ValidationError) -> str:
    if error.validator == "required":
        match = re.match(r"'([^']+)' is a required property", error.message)
        if match:
            return match.group(1)
    return ""


def _friendly(error: jsonschema.ValidationError, f: Field | None) -> str:
    """jsonschema's messages quote the value back; these read better in a chat and never echo long input."""
    v = error.validator
    limit: Any = error.validator_value
    if v == "format":
        return {"email": "enter an email address like name@example.com", "uri": "enter a full URL like https://example.com",
                "date": "enter a date as YYYY-MM-DD", "date-time": "enter a date and time like 2026-01-31T09:30:00Z"
                }.get(str(error.validator_value), "wrong format")
    if v == "minLength":
        return f"enter at least {error.validator_value} characters"
    if v == "maxLength":
        return f"enter at most {error.validator_value} characters"
    if v == "minimum":
        return f"must be at least {_num(float(limit))}"
    if v == "maximum":
        return f"must be at most {_num(float(limit))}"
    if v == "minItems":
        return f"choose at least {error.validator_value}"
    if v == "maxItems":
        return f"choose at most {error.validator_value}"
    if v == "enum":
        return "not one of the options"
    if v == "type":
        expected = error.validator_value
        return {"integer": "enter a whole number", "number": "enter a number", "boolean": "answer yes or no",
                "string": "enter text", "array": "choose from the options"}.get(str(expected), f"must be {expected}")
    if v == "required":
        return "this field is required"
    if v == "uniqueItems":
        return "choose each option once"
    return error.message[:200]


def approval_form(fields: Sequence[Field]) -> Form:
    """A form the host builds itself (edit a prompt, pick roots): same rendering and validation as elicitation."""
    properties = {f.name: {**f.schema(), "title": f.title, **({"default": f.default} if f.has_default else {})}
                  for f in fields}
    schema = {"type": "object", "properties": properties, "required": [f.name for f in fields if f.required]}
    return Form(fields=tuple(fields), schema=schema)
