"""Forms are pure: schema in, fields out; answers in, typed content or per-field reasons out."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.cli.demo.server import EVERY_FIELD
from bridge.door.forms import FieldKind, form_from_schema
from bridge.errors import UnsupportedSchema

FORM = form_from_schema(EVERY_FIELD)


def test_fields_come_in_schema_order_with_their_kinds() -> None:
    assert [(f.name, f.kind) for f in FORM.fields] == [
        ("name", FieldKind.TEXT), ("email", FieldKind.TEXT), ("homepage", FieldKind.TEXT), ("start", FieldKind.TEXT),
        ("pickup", FieldKind.TEXT), ("travellers", FieldKind.INTEGER), ("budget", FieldKind.NUMBER),
        ("window", FieldKind.BOOLEAN), ("climate", FieldKind.CHOICE), ("city", FieldKind.CHOICE),
        ("room", FieldKind.CHOICE), ("activities", FieldKind.MULTI), ("extras", FieldKind.MULTI)]
    assert [o.title for o in FORM.field("city").options] == ["Lisbon", "Oslo", "Kyoto"]
    assert [o.title for o in FORM.field("room").options] == ["Single", "Double", "Suite"]
    assert [o.value for o in FORM.field("extras").options] == ["bf", "pk", "late"]
    assert FORM.defaults() == {"travellers": 2, "budget": 120.5, "window": False, "climate": "mild", "room": "d",
                               "activities": ["food"]}


@pytest.mark.parametrize(("name", "text", "value"), [
    ("name", "  Ada  ", "Ada"), ("email", "ada@example.com", "ada@example.com"),
    ("homepage", "https://example.org/x", "https://example.org/x"), ("start", "2026-02-28", "2026-02-28"),
    ("pickup", "2026-02-28 10:15+01:00", "2026-02-28T10:15:00+01:00"), ("pickup", "2026-02-28T10:15:00Z",
                                                                        "2026-02-28T10:15:00Z"),
    ("travellers", "12", 12), ("travellers", "3.0", 3), ("budget", "7", 7), ("budget", "7.25", 7.25),
    ("window", "Y", True), ("window", "false", False), ("climate", "2", "mild"), ("city", "kyoto", "kyo"),
    ("city", "osl", "osl"), ("room", "Suite", "x"), ("activities", "1, museums,Beach", ["hiking", "museums", "beach"]),
    ("extras", "parking", ["pk"]),
])
def test_text_answers_parse_to_the_schema_type(name: str, text: str, value: Any) -> None:
    parsed = FORM.field(name).parse_text(text)
    assert parsed == value and type(parsed) is type(value)


@pytest.mark.parametrize(("name", "text", "reason"), [
    ("name", "A", "at least 2"), ("email", "ada", "email address"), ("homepage", "example", "full URL"),
    ("start", "2026-02-30", "not a date that exists"), ("start", "30.02.2026", "YYYY-MM-DD"),
    ("pickup", "2026-02-28 10:15", "time zone"),
    ("travellers", "13", "at most 12"), ("travellers", "2.5", "whole number"), ("budget", "lots", "not a number"),
    ("budget", "nan", "finite"), ("window", "maybe", "yes or no"), ("city", "Paris", "not one of the options"),
    ("activities", "hiking,food,beach,museums", "at most 3"), ("climate", "9", "not one of the options"),
])
def test_bad_text_answers_give_a_reason(name: str, text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        FORM.field(name).parse_text(text)


def test_validate_reports_every_wrong_field_and_required_ones() -> None:
    _, errors = FORM.validate({"email": "x", "travellers": 0, "activities": []})
    assert set(errors.fields) == {"name", "email", "start", "city", "travellers", "activities"}
    assert errors.fields["name"] == "this field is required"


def test_validate_drops_unknown_keys_and_coerces_widget_strings() -> None:
    content, errors = FORM.validate({"name": "Ada", "email": "a@b.org", "start": "2026-01-01", "city": "lis",
                                     "budget": "10", "evil": "x"})
    assert not errors
    assert content == {"name": "Ada", "email": "a@b.org", "start": "2026-01-01", "city": "lis", "budget": 10}


@pytest.mark.parametrize(("schema", "reason"), [
    ({"type": "array"}, "type 'object'"),
    ({"type": "object", "properties": {"a": {"type": "object"}}}, "type 'object' is not supported"),
    ({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}}}}, "multi-select"),
    ({"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}}, "pattern"),
    ({"type": "object", "properties": {"a": {"type": "string", "format": "ipv4"}}}, "format 'ipv4'"),
    ({"type": "object", "properties": {"a": {"type": "string", "enum": []}}}, "non-empty"),
    ({"type": "object", "properties": {"a": {"type": "string", "enum": ["x"], "enumNames": ["X", "Y"]}}},
     "one title per value"),
    ({"type": "object", "properties": {"a": {"type": "integer", "default": "3"}}}, "default must be a number"),
    ({"type": "object", "properties": {"a": {}}}, "has no type"),
    ({"type": "object", "properties": {}, "required": ["b"]}, "unknown properties: b"),
    ({"type": "object", "properties": {}, "allOf": []}, "unsupported keywords: allOf"),
])
def test_schemas_outside_the_subset_are_refused_with_a_reason(schema: dict[str, Any], reason: str) -> None:
    with pytest.raises(UnsupportedSchema, match=reason):
        form_from_schema(schema)


def test_secret_looking_fields_are_flagged() -> None:
    form = form_from_schema({"type": "object", "properties": {
        "api_key": {"type": "string"}, "card": {"type": "string", "title": "Card number"},
        "pw": {"type": "string", "description": "Your password"}, "city": {"type": "string"}}})
    assert [f.name for f in form.secret_fields] == ["api_key", "card", "pw"]


def test_hints_say_range_format_and_default() -> None:
    assert FORM.field("travellers").hint() == "a whole number, 1 to 12, default: 2"
    assert FORM.field("room").hint().endswith("default: Double")
    assert FORM.field("homepage").hint() == "a URL, optional"
