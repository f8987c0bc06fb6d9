"""A form's fields as HTML inputs, and a browser's submission back as the JSON content `Form.validate` takes.

Pure logic, no I/O and no HTML (the template draws it). Inputs are named by position (`f0`, `f1`, …), never by the
server's property names, so no server text ends up in a name or id. What a browser sends is kept as raw strings per
input name (`Raw`), so a page re-rendered after an error shows exactly what the person entered.

Native widgets per field kind: text, email, url, date, datetime-local with a UTC-offset choice (RFC 3339 needs a
zone, and a page without JavaScript cannot learn the browser's), number with min/max/step, a checkbox for a boolean
that always has a value and yes/no/not-set radios for an optional one, radios or a select for one choice,
checkboxes for several.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from bridge.door.forms import Field, FieldKind, Form
from bridge.door.model import JSONValue

Raw = Mapping[str, list[str]]
"""Submitted values by input name, as strings (several for checkboxes)."""

RADIO_MAX = 5
"""Up to this many options show as radio buttons (one tap each on a phone); more go in a select."""

OFFSETS = ("-12:00", "-11:00", "-10:00", "-09:30", "-09:00", "-08:00", "-07:00", "-06:00", "-05:00", "-04:00",
           "-03:30", "-03:00", "-02:00", "-01:00", "+00:00", "+01:00", "+02:00", "+03:00", "+03:30", "+04:00",
           "+04:30", "+05:00", "+05:30", "+05:45", "+06:00", "+06:30", "+07:00", "+08:00", "+08:45", "+09:00",
           "+09:30", "+10:00", "+10:30", "+11:00", "+12:00", "+12:45", "+13:00", "+14:00")
"""Every UTC offset in use somewhere."""

MAX_TITLE = 200
MAX_DESCRIPTION = 1000
SUGGESTION = 100
"""Characters of a server's unshown date default quoted in a field's hint."""
MAX_OPTION = 200


class Widget(enum.StrEnum):
    TEXT = "text"
    TEXTAREA = "textarea"
    EMAIL = "email"
    URL = "url"
    DATE = "date"
    DATETIME = "datetime"
    NUMBER = "number"
    CHECKBOX = "checkbox"
    YES_NO = "yes_no"
    RADIOS = "radios"
    SELECT = "select"
    CHECKBOXES = "checkboxes"


PICKERS = frozenset({Widget.DATE, Widget.DATETIME})
"""Inputs a browser shows only a value in their own format in."""


@dataclass(frozen=True, slots=True)
class Choice:
    value: str
    label: str
    chosen: bool


@dataclass(frozen=True, slots=True)
class FieldView:
    """What the template needs to draw one field. Text from the server is plain text; the template escapes it."""

    name: str
    widget: Widget
    title: str
    description: str
    required: bool
    hint: str
    error: str
    value: str = ""
    zone: str = "+00:00"
    choices: tuple[Choice, ...] = ()
    zones: tuple[str, ...] = ()
    attrs: Mapping[str, str] = field(default_factory=dict)
    """Native constraints (minlength, maxlength, min, max, step): the browser checks them as well as the bridge."""


def input_name(index: int) -> str:
    return f"f{index}"


def widget_of(f: Field) -> Widget:
    if f.kind is FieldKind.TEXT:
        if f.format:
            return {"email": Widget.EMAIL, "uri": Widget.URL, "date": Widget.DATE,
                    "date-time": Widget.DATETIME}[f.format]
        return Widget.TEXTAREA if f.multiline else Widget.TEXT
    if f.kind in (FieldKind.NUMBER, FieldKind.INTEGER):
        return Widget.NUMBER
    if f.kind is FieldKind.BOOLEAN:
        # An unticked checkbox sends "no"; a field that may stay unanswered needs a third choice.
        return Widget.CHECKBOX if f.required or f.has_default else Widget.YES_NO
    if f.kind is FieldKind.CHOICE:
        return Widget.RADIOS if len(f.options) <= RADIO_MAX else Widget.SELECT
    return Widget.CHECKBOXES


# -- content → raw (the defaults a page starts with) ----------------------------------------------------------------


def raw_from_content(form: Form, content: Mapping[str, JSONValue]) -> dict[str, list[str]]:
    """Input values showing `content` (the form's defaults when a page is first opened)."""
    raw: dict[str, list[str]] = {}
    for i, f in enumerate(form.fields):
        name = input_name(i)
        if f.name not in content or content[f.name] is None:
            continue
        value = content[f.name]
        widget = widget_of(f)
        if widget in PICKERS and isinstance(value, str) and f.problem(value):
            continue  # a browser's date input drops a value not in its format (or rewrites a week date): `hint`
        if widget is Widget.DATETIME and isinstance(value, str):
            local, zone = split_datetime(value)
            raw[name], raw[name + "_tz"] = [local], [zone]
        elif widget is Widget.CHECKBOX:
            raw[name] = ["on"] if value is True else []
        elif widget is Widget.YES_NO:
            raw[name] = ["yes" if value else "no"]
        elif isinstance(value, list):
            raw[name] = [str(v) for v in value]
        elif isinstance(value, float):
            raw[name] = [repr(value)]
        else:
            raw[name] = [str(value)]
    return raw


def split_datetime(value: str) -> tuple[str, str]:
    """An RFC 3339 date-time as a datetime-local value and its UTC offset (`+01:00`); unparsable text stays as
    typed with UTC, for the person to correct."""
    try:
        parsed = dt.datetime.fromisoformat(value.replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        return value, "+00:00"
    offset = parsed.utcoffset()
    zone = _format_offset(offset) if offset is not None else "+00:00"
    spec = "seconds" if parsed.second or parsed.microsecond else "minutes"
    return parsed.replace(tzinfo=None, microsecond=0).isoformat(timespec=spec), zone


def _format_offset(offset: dt.timedelta) -> str:
    minutes = int(offset.total_seconds() // 60)
    sign = "-" if minutes < 0 else "+"
    hours, mins = divmod(abs(minutes), 60)
    return f"{sign}{hours:02d}:{mins:02d}"


# -- raw → content (a submission) ----------------------------------------------------------------------------------


def raw_from_items(form: Form, items: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """Group a submission's (name, value) pairs by input name, keeping only this form's inputs."""
    known = {input_name(i) for i in range(len(form.fields))}
    known |= {n + "_tz" for n in known}
    raw: dict[str, list[str]] = {}
    for name, value in items:
        if name in known:
            raw.setdefault(name, []).append(value)
    return raw


def content_from_raw(form: Form, raw: Raw) -> dict[str, JSONValue]:
    """The JSON content a submission means, for `Form.validate` (the same check a chat answer gets). Nothing is
    judged here: unanswered fields are left out, and text that is not a number or a date is passed on as typed, for
    validation to explain."""
    content: dict[str, JSONValue] = {}
    for i, f in enumerate(form.fields):
        name = input_name(i)
        values = raw.get(name, [])
        first = values[0] if values else ""
        widget = widget_of(f)
        if widget is Widget.CHECKBOX:
            content[f.name] = bool(values)
        elif widget is Widget.YES_NO:
            if first in ("yes", "no"):
                content[f.name] = first == "yes"
        elif widget is Widget.CHECKBOXES:
            if values:
                content[f.name] = list(dict.fromkeys(values))
        elif widget is Widget.TEXTAREA:
            text = first.replace("\r\n", "\n").strip("\n")
            if text.strip():
                content[f.name] = text
        elif widget is Widget.DATETIME:
            if first.strip():
                zone = (raw.get(name + "_tz") or ["+00:00"])[0]
                content[f.name] = join_datetime(first.strip(), zone)
        elif first.strip():
            content[f.name] = first.strip()
    return content


def join_datetime(local: str, zone: str) -> str:
    """A datetime-local value and an offset as RFC 3339 (`2026-12-01T09:30:00+01:00`, `Z` for UTC); anything that
    does not parse is passed on as typed."""
    try:
        parsed = dt.datetime.fromisoformat(local)
        offset = dt.datetime.strptime(zone, "%z").utcoffset() if zone else dt.timedelta(0)
    except ValueError:
        return local
    if parsed.tzinfo is not None or offset is None:
        return local
    stamp = parsed.replace(tzinfo=dt.timezone(offset)).isoformat(timespec="seconds")
    return stamp.replace("+00:00", "Z")


# -- views -----------------------------------------------------------------------------------------------------------


def field_views(form: Form, raw: Raw, errors: Mapping[str, str] | None = None) -> list[FieldView]:
    """Every field ready to draw with the values in `raw` and the reasons in `errors` (by property name)."""
    errors = errors or {}
    views: list[FieldView] = []
    for i, f in enumerate(form.fields):
        name = input_name(i)
        values = raw.get(name, [])
        widget = widget_of(f)
        view = FieldView(name=name, widget=widget, title=_cut(f.title, MAX_TITLE),
                         description=_cut(f.description, MAX_DESCRIPTION), required=f.required, hint=hint(f),
                         error=errors.get(f.name, ""), value=values[0] if values else "", attrs=_attrs(f, widget))
        if widget is Widget.DATETIME:
            zone = (raw.get(name + "_tz") or ["+00:00"])[0]
            zones = OFFSETS if zone in OFFSETS else (*OFFSETS, zone)
            # Minutes unless the value has seconds: a browser refuses a value finer than the step.
            attrs = {"step": "1"} if len(view.value) > len("2026-01-31T09:30") else {}
            view = replace(view, zone=zone, zones=zones, attrs=attrs)
        elif widget is Widget.YES_NO:
            view = replace(view, choices=(Choice("yes", "Yes", view.value == "yes"),
                                          Choice("no", "No", view.value == "no"),
                                          Choice("", "Not set", view.value not in ("yes", "no"))))
        elif widget in (Widget.RADIOS, Widget.SELECT, Widget.CHECKBOXES):
            chosen = set(values)
            options = tuple(Choice(o.value, _cut(o.title, MAX_OPTION), o.value in chosen) for o in f.options)
            if widget is not Widget.CHECKBOXES and not f.required:
                options += (Choice("", "Not set", not chosen & {o.value for o in f.options}),)
            view = replace(view, choices=options)
        views.append(view)
    return views


def _attrs(f: Field, widget: Widget) -> dict[str, str]:
    attrs: dict[str, str] = {}
    if widget in (Widget.TEXT, Widget.TEXTAREA, Widget.EMAIL, Widget.URL):
        if f.min_length is not None:
            attrs["minlength"] = str(f.min_length)
        if f.max_length is not None:
            attrs["maxlength"] = str(f.max_length)
    elif widget is Widget.NUMBER:
        if f.minimum is not None:
            attrs["min"] = _number(f.minimum)
        if f.maximum is not None:
            attrs["max"] = _number(f.maximum)
        attrs["step"] = "1" if f.kind is FieldKind.INTEGER else "any"
        attrs["inputmode"] = "numeric" if f.kind is FieldKind.INTEGER else "decimal"
    return attrs


def hint(f: Field) -> str:
    """Limits a person should know before submitting; the widget already says what kind of value it wants. A date
    default the field refuses (an ISO week date such as `2026-W01-1`) is not pre-filled, so it is suggested here."""
    limits = _limits(f)
    if widget_of(f) not in PICKERS or not f.has_default or f.default_fits:
        return limits
    suggested = f"suggested: {_cut(str(f.default), SUGGESTION)}"
    return f"{suggested}; {limits}" if limits else suggested


def _limits(f: Field) -> str:
    if f.kind is FieldKind.TEXT:
        if f.min_length is not None and f.max_length is not None:
            return f"{f.min_length} to {f.max_length} characters"
        if f.min_length is not None:
            return f"at least {f.min_length} characters"
        if f.max_length is not None:
            return f"at most {f.max_length} characters"
        if f.format == "date-time":
            return "date, time and UTC offset"
        return ""
    if f.kind in (FieldKind.NUMBER, FieldKind.INTEGER):
        what = "a whole number" if f.kind is FieldKind.INTEGER else "a number"
        if f.minimum is not None and f.maximum is not None:
            return f"{what} from {_number(f.minimum)} to {_number(f.maximum)}"
        if f.minimum is not None:
            return f"{what}, at least {_number(f.minimum)}"
        if f.maximum is not None:
            return f"{what}, at most {_number(f.maximum)}"
        return what
    if f.kind is FieldKind.MULTI:
        low, high = f.min_items, f.max_items
        if low is not None and high is not None:
            return f"choose {low}" if low == high else f"choose {low} to {high}"
        if low is not None:
            return f"choose at least {low}"
        if high is not None:
            return f"choose at most {high}"
        return "choose any"
    return ""


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
