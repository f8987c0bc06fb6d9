"""The form model checks answers itself; jsonschema is the oracle. Generated schemas (the spec's subset) and answers
(right and wrong types, values around every limit) must get the same verdict from both, and whatever the model
accepts (after turning widget strings into numbers) is valid and has the types the schema asked for."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from bridge.door.forms import FieldKind, form_from_schema
from bridge.door.forms.checks import FORMAT_CHECKER

OPTIONS = ["a", "b", "c", "hiking", "Ünïcode", "x y"]
TEXTS = st.one_of(st.text(max_size=12), st.sampled_from([
    "ada@example.com", "ada@", "ada@example", "https://example.org/x", "example", "2026-02-28", "2026-02-30",
    "2026-02-28T10:15:00Z", "2026-02-28T10:15:00", "", " ", *OPTIONS]))
ANY_VALUE = st.one_of(
    st.none(), st.booleans(), st.integers(-20, 20), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
    TEXTS, st.lists(st.sampled_from(OPTIONS), max_size=5), st.lists(st.integers(0, 3), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


def _limits(draw: st.DrawFn, low: str, high: str, *, integers: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    values = st.integers(0, 12) if integers else st.one_of(st.integers(-10, 10), st.floats(-10, 10))
    if draw(st.booleans()):
        out[low] = draw(values)
    if draw(st.booleans()):
        out[high] = draw(values)
    return out


@st.composite
def properties(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["string", "number", "integer", "boolean", "enum", "oneOf", "multi", "multiAnyOf"]))
    if kind == "string":
        prop: dict[str, Any] = {"type": "string", **_limits(draw, "minLength", "maxLength", integers=True)}
        fmt = draw(st.sampled_from(["", "email", "uri", "date", "date-time"]))
        return {**prop, "format": fmt} if fmt else prop
    if kind in ("number", "integer"):
        return {"type": kind, **_limits(draw, "minimum", "maximum", integers=False)}
    if kind == "boolean":
        return {"type": "boolean"}
    options = draw(st.lists(st.sampled_from(OPTIONS), min_size=1, max_size=4, unique=True))
    if kind == "enum":
        return {"type": "string", "enum": options}
    if kind == "oneOf":
        return {"type": "string", "oneOf": [{"const": o, "title": o.upper()} for o in options]}
    items = {"type": "string", "enum": options} if kind == "multi" else {"anyOf": [{"const": o} for o in options]}
    return {"type": "array", "items": items, "uniqueItems": True,
            **_limits(draw, "minItems", "maxItems", integers=True)}


@st.composite
def schemas(draw: st.DrawFn) -> dict[str, Any]:
    props = draw(st.dictionaries(st.sampled_from(["f1", "f2", "f3", "f4"]), properties(), min_size=1, max_size=4))
    required = draw(st.lists(st.sampled_from(sorted(props)), unique=True))
    return {"type": "object", "properties": props, "required": required}


def oracle(schema: dict[str, Any]) -> Draft202012Validator:
    return Draft202012Validator(schema, format_checker=FORMAT_CHECKER)


def has_schema_type(kind: FieldKind, value: Any) -> bool:
    return {FieldKind.TEXT: isinstance(value, str), FieldKind.CHOICE: isinstance(value, str),
            FieldKind.INTEGER: isinstance(value, int) and not isinstance(value, bool),
            FieldKind.NUMBER: isinstance(value, int | float) and not isinstance(value, bool),
            FieldKind.BOOLEAN: isinstance(value, bool), FieldKind.MULTI: isinstance(value, list)}[kind]


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prop=properties(), value=ANY_VALUE)
def test_a_field_and_jsonschema_agree_on_every_value(prop: dict[str, Any], value: Any) -> None:
    form = form_from_schema({"type": "object", "properties": {"f": prop}})
    field = form.field("f")
    assert (field.problem(value) == "") == oracle(prop).is_valid(value), (prop, value, field.problem(value))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=schemas(), data=st.data())
def test_a_form_accepts_what_jsonschema_accepts_and_sends_only_valid_typed_content(schema: dict[str, Any],
                                                                                   data: st.DataObject) -> None:
    form = form_from_schema(schema)
    answer = data.draw(st.dictionaries(st.sampled_from(sorted(schema["properties"])), ANY_VALUE))
    content, errors = form.validate(answer)
    given_answer = {k: v for k, v in answer.items() if v is not None and v != ""}
    if not errors:
        assert oracle(schema).is_valid(content), (schema, answer, content)
        assert all(has_schema_type(form.field(k).kind, v) for k, v in content.items()), content
    if oracle(schema).is_valid(given_answer):
        assert not errors, (schema, answer, errors)
