"""One form field as one native Block Kit input (pure): the mapping table of docs/slack.md in code.

| field                         | element                                                              |
|-------------------------------|----------------------------------------------------------------------|
| text                          | plain_text_input (min/max length when Slack can enforce them)        |
| text, format email / uri      | email_text_input / url_text_input                                     |
| text, format date / date-time | datepicker / datetimepicker (UNIX seconds ↔ RFC 3339, UTC)           |
| number / integer              | number_input, decimals only for number, min/max as plain decimals     |
| boolean                       | radio_buttons Yes / No (a checkbox could not tell "no" from "unanswered") |
| choice                        | radio_buttons (≤5), static_select (≤100), external_select (more)     |
| multi                         | checkboxes (≤5), multi_static_select (≤100), multi_external_select   |

Option values are the option's index, never the server's value: Slack caps values at 150 characters and the server
may use anything, so the mapping stays on our side (`translate.option_value`). Lists over Slack's 100 options use
external selects, Slack's documented way to offer long lists: the adapter answers `block_suggestion` requests from
the field's own options (`matching_options`), filtered by what the person types.

What Block Kit cannot express (patterns, lengths over 3000, minItems, bounds on text) is validated by the core.
Slack rejects a whole view over one bad value, so what is pre-filled must fit: a text default longer than the input
takes (`kept_default`) is not pre-filled, the input says that leaving it empty keeps the original, and
`translate.page_answers` does so; integer bounds are rounded inwards; a default outside the bounds is not pre-filled.
A date or date-time default its picker cannot take (`unshown_default`: a date not written YYYY-MM-DD, such as the
ISO week date `2026-W01-1` that Python's `fromisoformat` reads, or a time before 1970 or past Slack's ten digits of
UNIX seconds) leaves the picker empty, and the input's hint suggests it as the server wrote it.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from decimal import Decimal
from typing import Any

from adapters.slack import ids
from adapters.slack.escape import one_line, plain
from bridge.door.forms import Field, FieldKind

JSON = dict[str, Any]

MAX_OPTIONS = 100
MAX_RADIO = 5
"""Up to this many options show as radio buttons or checkboxes (Slack allows 10; five stay readable on a phone)."""
OPTION_TEXT = 75
LABEL = 2000
HINT = 2000
PLACEHOLDER = 150
TEXT_LENGTH = 3000
YES, NO = "0", "1"
DATE_TIME_MAX = 9_999_999_999
"""A datetimepicker's `initial_date_time` is UNIX seconds of at most ten digits, from 0 (Slack's reference)."""
SUGGESTION = 100
"""Characters of an unshown default quoted in the hint, so the field's own description still fits."""
_FULL_DATE = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)
"""RFC 3339's full-date, the only form a datepicker's `initial_date` takes."""


def text(value: str, limit: int) -> JSON:
    return {"type": "plain_text", "text": plain(value, limit) or " ", "emoji": True}


def option(title: str, index: int) -> JSON:
    return {"text": {"type": "plain_text", "text": one_line(title, OPTION_TEXT) or "(empty)", "emoji": True},
            "value": str(index)}


def input_block(f: Field, index: int) -> JSON:
    """The input block for field number `index` of its form, defaults pre-filled."""
    kept = kept_default(f)
    block: JSON = {
        "type": "input",
        "block_id": ids.field_block(index),
        "label": text(f.title, LABEL),
        "optional": not f.required or kept is not None,  # empty keeps the default, so Slack must allow empty
        "element": element(f),
    }
    hint = f.description
    if kept is not None:
        hint = (f"Leave this empty to keep the original ({len(kept)} characters, too long to show here)."
                + (f" {hint}" if hint else ""))
    if (unshown := unshown_default(f)) is not None:
        hint = f"Suggested: {one_line(unshown, SUGGESTION)}." + (f" {hint}" if hint else "")
    if hint:
        block["hint"] = text(hint, HINT)
    return block


def prefill_limit(f: Field) -> int:
    """The longest text Slack takes as an input's `initial_value`: 3000, or the input's own `max_length`."""
    if f.format not in ("email", "uri") and f.max_length is not None and f.max_length >= 1:
        return min(f.max_length, TEXT_LENGTH)
    return TEXT_LENGTH


def kept_default(f: Field) -> str | None:
    """A text default too long to pre-fill, or None. Its input starts empty, and an empty answer means this."""
    if (f.kind is not FieldKind.TEXT or f.format in ("date", "date-time") or not f.has_default
            or not isinstance(f.default, str)):
        return None
    return f.default if len(f.default) > prefill_limit(f) else None


def picker_default(f: Field) -> str | int | None:
    """What a date picker (`initial_date`) or date-time picker (`initial_date_time`) starts at: the field's default
    when the picker can take it, else None."""
    if not f.has_default or not isinstance(f.default, str):
        return None
    if f.format == "date":
        return f.default if _is_date(f.default) else None
    if f.format == "date-time":
        seconds = rfc3339_to_unix(f.default)
        return seconds if seconds is not None and 0 <= seconds <= DATE_TIME_MAX else None
    return None


def unshown_default(f: Field) -> str | None:
    """A date or date-time default its picker cannot take (Slack would refuse the whole view), or None."""
    if (f.kind is FieldKind.TEXT and f.format in ("date", "date-time") and f.has_default
            and isinstance(f.default, str) and f.default.strip() and picker_default(f) is None):
        return f.default
    return None


def element(f: Field) -> JSON:
    el: JSON
    if f.kind is FieldKind.TEXT:
        el = _text_element(f)
    elif f.kind in (FieldKind.NUMBER, FieldKind.INTEGER):
        el = _number_element(f)
    elif f.kind is FieldKind.BOOLEAN:
        options = [option("Yes", 0), option("No", 1)]
        el = {"type": "radio_buttons", "options": options}
        if f.has_default and isinstance(f.default, bool):
            el["initial_option"] = options[0] if f.default else options[1]
    elif f.kind is FieldKind.CHOICE:
        el = _choice_element(f)
    else:
        el = _multi_element(f)
    el["action_id"] = ids.FIELD_ACTION
    return el


def _text_element(f: Field) -> JSON:
    default = f.default if f.has_default and isinstance(f.default, str) else None
    if f.format in ("date", "date-time"):
        el: JSON = {"type": "datepicker" if f.format == "date" else "datetimepicker"}
        if (initial := picker_default(f)) is not None:
            el["initial_date" if f.format == "date" else "initial_date_time"] = initial
        return el
    if f.format in ("email", "uri"):
        el = {"type": "email_text_input" if f.format == "email" else "url_text_input"}
    else:
        el = {"type": "plain_text_input", "multiline": f.multiline}
        # Slack only takes lengths it can enforce (0-3000, max ≥ 1); the core checks the rest on submit.
        if f.min_length is not None and f.min_length <= TEXT_LENGTH:
            el["min_length"] = f.min_length
        if f.max_length is not None and 1 <= f.max_length <= TEXT_LENGTH:
            el["max_length"] = f.max_length
    if default and len(default) <= prefill_limit(f):
        el["initial_value"] = default
    return el


def _number_element(f: Field) -> JSON:
    """A number input Slack accepts: integer bounds rounded inwards (min 0.5 → 1), no bound pair without a value
    between them, and a default pre-filled only when it is within them (the core still checks every answer)."""
    integer = f.kind is FieldKind.INTEGER
    el: JSON = {"type": "number_input", "is_decimal_allowed": not integer}
    low = f.minimum if f.minimum is not None and math.isfinite(f.minimum) else None
    high = f.maximum if f.maximum is not None and math.isfinite(f.maximum) else None
    if integer:
        low = math.ceil(low) if low is not None else None
        high = math.floor(high) if high is not None else None
    if low is not None and high is not None and low > high:
        low = high = None  # nothing fits; the core says so on submit
    if low is not None:
        el["min_value"] = number_text(low)
    if high is not None:
        el["max_value"] = number_text(high)
    default = f.default if f.has_default else None
    if (isinstance(default, int | float) and not isinstance(default, bool) and math.isfinite(default)
            and (not integer or float(default).is_integer())
            and (low is None or default >= low) and (high is None or default <= high)):
        el["initial_value"] = number_text(default)
    return el


def _choice_element(f: Field) -> JSON:
    options = [option(o.title, i) for i, o in enumerate(f.options)]
    initial = next((options[i] for i, o in enumerate(f.options) if f.has_default and o.value == f.default), None)
    if len(options) <= MAX_RADIO:
        el: JSON = {"type": "radio_buttons", "options": options}
    elif len(options) <= MAX_OPTIONS:
        el = {"type": "static_select", "options": options, "placeholder": text("Choose one", PLACEHOLDER)}
    else:
        el = {"type": "external_select", "min_query_length": 0,
              "placeholder": text(f"Type to search {len(options)} options", PLACEHOLDER)}
    if initial is not None:
        el["initial_option"] = initial
    return el


def _multi_element(f: Field) -> JSON:
    options = [option(o.title, i) for i, o in enumerate(f.options)]
    chosen = f.default if f.has_default and isinstance(f.default, list) else []
    initial = [options[i] for i, o in enumerate(f.options) if o.value in chosen]
    if len(options) <= MAX_RADIO:
        el: JSON = {"type": "checkboxes", "options": options}
    elif len(options) <= MAX_OPTIONS:
        el = {"type": "multi_static_select", "options": options, "placeholder": text("Choose", PLACEHOLDER)}
    else:
        el = {"type": "multi_external_select", "min_query_length": 0,
              "placeholder": text(f"Type to search {len(options)} options", PLACEHOLDER)}
    if f.max_items is not None and f.max_items >= 1 and el["type"] != "checkboxes":
        el["max_selected_items"] = f.max_items
    if initial:
        el["initial_options"] = initial
    return el


def matching_options(f: Field, query: str) -> list[JSON]:
    """Options of a long choice list that match what the person typed (title or value), at most 100."""
    folded = query.strip().casefold()
    found = [option(o.title, i) for i, o in enumerate(f.options)
             if not folded or folded in o.title.casefold() or folded in o.value.casefold()]
    return found[:MAX_OPTIONS]


def number_text(value: float) -> str:
    """Slack wants numbers in number_input as strings: plain decimals (never `1e-07`), whole numbers without .0."""
    if isinstance(value, int):
        return str(value)
    if value.is_integer():
        return str(int(value))
    return format(Decimal(repr(value)), "f")


def rfc3339_to_unix(value: str) -> int | None:
    """UNIX seconds of an RFC 3339 date-time (one without a zone is read as UTC); None for anything else, such as
    the ISO week date `2026-W01-1T10:00Z` that `fromisoformat` also reads."""
    if not _FULL_DATE.match(value) or value[10:11] not in ("T", "t", " "):
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return int(parsed.timestamp())


def unix_to_rfc3339(seconds: int | float) -> str:
    """What a datetimepicker returns (UNIX seconds, picked in the person's own time zone) as RFC 3339 in UTC."""
    return dt.datetime.fromtimestamp(int(seconds), dt.UTC).isoformat().replace("+00:00", "Z")


def _is_date(value: str) -> bool:
    """Exactly YYYY-MM-DD and a real date (`2026-02-30` is not)."""
    if not _FULL_DATE.fullmatch(value):
        return False
    try:
        dt.date.fromisoformat(value)
    except ValueError:
        return False
    return True
