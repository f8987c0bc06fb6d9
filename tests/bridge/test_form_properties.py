"""Property tests of the form model: generated schemas (inside the spec's subset, at its edges and outside it) and
generated answers (typed text and widget values). Over 10 000 examples a run, split over the tests below.

Whatever is generated, the form model raises nothing but the bridge's own errors (`UnsupportedSchema` for a schema,
`ValueError` with a sentence for a person when an answer does not fit, never Python's own wording), and whatever it
accepts is valid against the server's schema (jsonschema as the oracle, formats checked) and has the JSON type the
schema asked for (an integer is an `int`, never `3.0` or `True`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from bridge.door.forms import Field, FieldKind, Form, form_from_schema
from bridge.door.forms.checks import FORMAT_CHECKER
from bridge.errors import UnsupportedSchema


def examples(n: int) -> settings:
    """`n` examples, no deadline (a machine shared with other work is slow at times), nothing written to disk."""
    return settings(max_examples=n, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
INTERNAL = ("invalid literal", "could not convert", "too large to convert", "Overflow", "object of type",
            "not supported between", "unhashable", "has no attribute", "NoneType")
"""Python's own wording: a message with these leaked an exception meant for programmers."""

OPTIONS = ["a", "b", "hiking", "Ünïcode", "x y", "1", "2", "٣", "ada", ""]
HUGE = [10**400, -(10**400), 10**20, 2**63, 1e308, -1e308, 5e-324]
NUMBERS = st.one_of(st.integers(-12, 12), st.floats(-12, 12, allow_nan=False), st.integers(-12, 12),
                    st.sampled_from(HUGE))
TEXTS = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["ada@example.com", "ada@", "ada@example", "https://example.org/x", "example", "2026-02-28",
                     "2026-02-30", "2026-02-28T10:15:00Z", "2026-02-28 10:15+01:00", "2026-02-28T10:15:00", "", " ",
                     "²", "٣", "3", "3.0", "1e3", "1e400", "-0", "inf", "nan", "yes", "no", "y", "1, 2", "a,b,a",
                     "0x10", "1_000", " 7 ", "1,hiking", *OPTIONS]))
WIDGET = st.one_of(
    st.none(), st.booleans(), st.integers(-20, 20), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(HUGE), TEXTS, st.lists(st.sampled_from(OPTIONS), max_size=5),
    st.lists(st.integers(0, 3), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


# Strategies are built once: building them inside each draw costs more than the checks themselves.
MAYBE = st.booleans()
KINDS = st.sampled_from(["string", "string", "number", "integer", "integer", "boolean", "enum", "enumNames", "oneOf",
                         "multi", "multiAnyOf", "outside"])
LENGTHS = st.one_of(st.integers(0, 12), st.just(-1))
ITEM_COUNTS = st.integers(0, 4)
FORMATS = st.sampled_from(["", "", "", "email", "uri", "date", "date-time", "", "email", "hostname"])
OUTSIDE: st.SearchStrategy[dict[str, Any]] = st.sampled_from([
    {"type": "object", "properties": {}}, {"type": "array", "items": {}}, {"type": "string", "pattern": "^a"},
    {"type": "null"}, {}, {"type": 3}, {"type": "string", "enum": []}, {"type": "string", "enum": [1, 2]},
    {"type": "number", "minimum": "1"}, {"type": "string", "title": 5}])
OPTION_LISTS = st.lists(st.sampled_from(OPTIONS), min_size=1, max_size=5)  # repeats allowed


def _one_in(n: int) -> st.SearchStrategy[bool]:
    return st.integers(0, n - 1).map(lambda k: k == n // 2)


ONE_IN = {n: _one_in(n) for n in (4, 6, 20)}
"""True about once in n draws (a middle value: hypothesis favours the ends of a range)."""
TITLES = st.sampled_from(["Password", "API key", "Card number", "Name\u2060", "²"])
NAMES = ["f1", "f2", "f3", "password", "n"]


def _limits(draw: st.DrawFn, low: str, high: str, values: st.SearchStrategy[Any]) -> dict[str, Any]:
    return {key: draw(values) for key in (low, high) if draw(MAYBE)}


@st.composite
def properties(draw: st.DrawFn) -> dict[str, Any]:
    """One property: mostly inside the subset, sometimes at its edges (huge limits, repeated options, defaults that
    do not fit), sometimes outside it (unknown keywords, nested objects, wrong types)."""
    kind = draw(KINDS)
    prop: dict[str, Any]
    if kind == "string":
        prop = {"type": "string", **_limits(draw, "minLength", "maxLength", LENGTHS)}
        fmt = draw(FORMATS)
        if fmt:
            prop["format"] = fmt
    elif kind in ("number", "integer"):
        prop = {"type": kind, **_limits(draw, "minimum", "maximum", NUMBERS)}
    elif kind == "boolean":
        prop = {"type": "boolean"}
    elif kind == "outside":
        prop = dict(draw(OUTSIDE))
    else:
        options = draw(OPTION_LISTS)
        if kind == "enum":
            prop = {"type": "string", "enum": options}
        elif kind == "enumNames":
            prop = {"type": "string", "enum": options, "enumNames": [o.upper() + "!" for o in options]}
        elif kind == "oneOf":
            prop = {"type": "string", "oneOf": [{"const": o, "title": o.title()} for o in options]}
        else:
            items = {"type": "string", "enum": options} if kind == "multi" else {"anyOf": [{"const": o}
                                                                                          for o in options]}
            prop = {"type": "array", "items": items, **_limits(draw, "minItems", "maxItems", ITEM_COUNTS)}
    if draw(ONE_IN[6]):
        # Mostly a default of the right kind (it may still break a limit), now and then anything at all.
        prop["default"] = draw(WIDGET if draw(ONE_IN[4]) else _fitting_default(kind, prop))
    if draw(ONE_IN[6]):
        prop["title"] = draw(TITLES)
    return prop


def _fitting_default(kind: str, prop: dict[str, Any]) -> st.SearchStrategy[Any]:
    if kind == "string":
        return TEXTS
    if kind in ("number", "integer"):
        return NUMBERS
    if kind == "boolean":
        return MAYBE
    options = [o["const"] for o in prop["oneOf"]] if "oneOf" in prop else prop.get("enum") or (
        prop.get("items", {}).get("enum") or [o["const"] for o in prop.get("items", {}).get("anyOf", [])])
    if kind in ("multi", "multiAnyOf"):
        return st.lists(st.sampled_from(options), max_size=3, unique=True) if options else st.just([])
    return st.sampled_from(options) if options else st.just("")


PROPERTY = properties()
PROPERTIES = st.dictionaries(st.sampled_from(NAMES), PROPERTY, min_size=1, max_size=4)


@st.composite
def schemas(draw: st.DrawFn) -> dict[str, Any]:
    props = draw(PROPERTIES)
    required = draw(st.lists(st.sampled_from(sorted(props)), unique=True, max_size=len(props)))
    if draw(ONE_IN[20]):
        required.append("nowhere")  # a required name no property has: refused
    return {"type": "object", "properties": props, "required": required}


def typed_answer(field: Field) -> st.SearchStrategy[str]:
    """What a person might type for this field: often something that fits, often not."""
    if field.kind in (FieldKind.CHOICE, FieldKind.MULTI) and field.options:
        picks = [str(n) for n in range(len(field.options) + 2)] + [o.value for o in field.options] + [
            o.title.upper() for o in field.options]
        pick = st.sampled_from(picks)
        return st.one_of(TEXTS, pick, st.lists(pick, max_size=3).map(", ".join))
    if field.kind in (FieldKind.NUMBER, FieldKind.INTEGER):
        return st.one_of(TEXTS, NUMBERS.map(str), st.integers(-15, 15).map(str))
    return TEXTS


def widget_answer(field: Field) -> st.SearchStrategy[Any]:
    """What a platform widget might hand over for this field: its own kind of value, or anything at all."""
    if field.kind in (FieldKind.CHOICE, FieldKind.MULTI) and field.options:
        values = st.sampled_from([o.value for o in field.options])
        own: st.SearchStrategy[Any] = values if field.kind is FieldKind.CHOICE else st.lists(values, max_size=4)
    elif field.kind in (FieldKind.NUMBER, FieldKind.INTEGER):
        own = st.one_of(NUMBERS, NUMBERS.map(str))
    elif field.kind is FieldKind.BOOLEAN:
        own = MAYBE
    else:
        own = TEXTS
    return st.one_of(own, own, WIDGET)


SCHEMAS = schemas()


def built(schema: dict[str, Any]) -> Form | None:
    """The form, or None when the schema is refused with the bridge's own error (and nothing else)."""
    try:
        form = form_from_schema(schema)
    except UnsupportedSchema as exc:
        assert str(exc) and not any(w in str(exc) for w in INTERNAL), exc
        event("refused: " + str(exc).split(":")[-1][:40])
        return None
    for field in form.fields:
        field.hint()  # every adapter shows it: must not raise, whatever the limits
        if field.has_default:
            field.display(field.default)
    return form


def oracle(schema: dict[str, Any]) -> Draft202012Validator:
    return Draft202012Validator(schema, format_checker=FORMAT_CHECKER)


def has_json_type(field: Field, value: Any) -> bool:
    kind = field.kind
    if kind in (FieldKind.TEXT, FieldKind.CHOICE):
        return isinstance(value, str)
    if kind is FieldKind.BOOLEAN:
        return isinstance(value, bool)
    if kind is FieldKind.MULTI:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return isinstance(value, int) if kind is FieldKind.INTEGER else True


def refused_for_a_person(exc: ValueError) -> None:
    """A refused answer's message is a sentence for a person, never Python's."""
    message = str(exc)
    assert message and not any(w in message for w in INTERNAL), message


def check_accepted(schema: dict[str, Any], form: Form, content: dict[str, Any]) -> None:
    event(f"accepted {len(content)} values")
    assert oracle(schema).is_valid(content), (schema, content, [e.message for e in oracle(schema).iter_errors(content)])
    for name, value in content.items():
        assert has_json_type(form.field(name), value), (name, value)
    json.dumps(content, allow_nan=False)  # it goes over the wire as JSON


@examples(3000)
@given(schema=SCHEMAS, data=st.data())
def test_typed_answers_are_parsed_or_refused_in_words_and_what_is_sent_is_valid(schema: dict[str, Any],
                                                                               data: st.DataObject) -> None:
    form = built(schema)
    if form is None:
        return
    answers: dict[str, Any] = {}
    for field in form.fields:
        typed = data.draw(typed_answer(field), label=field.name)
        try:
            value = field.parse_text(typed)
        except ValueError as exc:
            refused_for_a_person(exc)
            continue
        assert has_json_type(field, value), (field, typed, value)
        answers[field.name] = value
    content, errors = form.validate(answers)
    if not errors:
        check_accepted(schema, form, content)


@examples(3000)
@given(schema=SCHEMAS, data=st.data())
def test_widget_values_are_coerced_or_refused_and_what_is_sent_is_valid(schema: dict[str, Any],
                                                                        data: st.DataObject) -> None:
    form = built(schema)
    if form is None:
        return
    answer = {f.name: data.draw(widget_answer(f), label=f.name) for f in form.fields if not data.draw(ONE_IN[6])}
    if data.draw(ONE_IN[6]):
        answer["extra"] = data.draw(WIDGET)  # a key the form does not have: dropped
    content, errors = form.validate(answer)
    for message in (*errors.fields.values(), errors.general):
        assert not any(w in message for w in INTERNAL), message
    if not errors:
        check_accepted(schema, form, content)
        assert set(content) <= set(schema["properties"])


@examples(2000)
@given(schema=SCHEMAS)
def test_the_defaults_a_form_prefills_are_sent_only_when_valid(schema: dict[str, Any]) -> None:
    form = built(schema)
    if form is None:
        return
    content, errors = form.validate(form.defaults())
    if not errors:
        check_accepted(schema, form, content)


@examples(2000)
@given(prop=PROPERTY, value=WIDGET, typed=TEXTS)
def test_one_field_takes_or_refuses_any_value(prop: dict[str, Any], value: Any, typed: str) -> None:
    schema = {"type": "object", "properties": {"f": prop}}
    form = built(schema)
    if form is None:
        return
    field = form.field("f")
    attempts: list[Callable[[], Any]] = [lambda: field.coerce(value), lambda: field.parse_text(typed)]
    for attempt in attempts:
        try:
            got = attempt()
        except ValueError as exc:
            refused_for_a_person(exc)
            continue
        assert has_json_type(field, got), (prop, value, typed, got)
        check_accepted(schema, form, {"f": got})
