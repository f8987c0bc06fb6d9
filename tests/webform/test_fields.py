"""Form fields as native inputs and submissions back as content: pure conversions, checked against `Form.validate`."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.cli.demo.server import EVERY_FIELD
from bridge.door.forms import form_from_schema
from bridge.web.forms.fields import (
    Widget,
    content_from_raw,
    field_views,
    join_datetime,
    raw_from_content,
    raw_from_items,
    split_datetime,
)

FORM = form_from_schema(EVERY_FIELD)
OPTIONAL_FLAGS = form_from_schema({"type": "object", "properties": {
    "maybe": {"type": "boolean", "title": "Maybe"},
    "sure": {"type": "boolean", "title": "Sure"},
    "pet": {"type": "string", "enum": ["a", "b", "c", "d", "e", "f"]},
    "note": {"type": "string", "maxLength": 500},
}, "required": ["sure", "pet"]})


def test_every_field_kind_gets_its_native_widget() -> None:
    widgets = [v.widget for v in field_views(FORM, {})]
    assert widgets == [Widget.TEXT, Widget.EMAIL, Widget.URL, Widget.DATE, Widget.DATETIME, Widget.NUMBER,
                       Widget.NUMBER, Widget.CHECKBOX, Widget.RADIOS, Widget.RADIOS, Widget.RADIOS,
                       Widget.CHECKBOXES, Widget.CHECKBOXES]
    assert [v.widget for v in field_views(OPTIONAL_FLAGS, {})] == [Widget.YES_NO, Widget.CHECKBOX, Widget.SELECT,
                                                                    Widget.TEXTAREA]
    name, _, _, _, _, travellers, budget, *_ = field_views(FORM, {})
    assert dict(name.attrs) == {"minlength": "2", "maxlength": "60"} and name.required
    assert dict(travellers.attrs) == {"min": "1", "max": "12", "step": "1", "inputmode": "numeric"}
    assert dict(budget.attrs) == {"min": "0", "max": "5000", "step": "any", "inputmode": "decimal"}
    assert travellers.hint == "a whole number from 1 to 12"


def test_defaults_are_prefilled_and_accepting_them_untouched_sends_exactly_the_defaults() -> None:
    raw = raw_from_content(FORM, FORM.defaults())
    views = {v.title: v for v in field_views(FORM, raw)}
    assert views["Travellers"].value == "2" and views["Budget per night (EUR)"].value == "120.5"
    assert [c.value for c in views["Activities"].choices if c.chosen] == ["food"]
    assert [c.label for c in views["Room"].choices if c.chosen] == ["Double"]
    content = content_from_raw(FORM, raw)
    assert content == {"travellers": "2", "budget": "120.5", "window": False, "climate": "mild", "room": "d",
                       "activities": ["food"]}
    checked, errors = FORM.validate({**content, "name": "Ada", "email": "ada@example.com", "start": "2026-12-01",
                                     "city": "osl"})
    assert not errors
    assert checked["travellers"] == 2 and checked["budget"] == 120.5 and checked["window"] is False


def test_a_full_submission_becomes_typed_content() -> None:
    items = [("f0", " Ada Lovelace "), ("f1", "ada@example.com"), ("f2", "https://example.org/ada"),
             ("f3", "2026-12-01"), ("f4", "2026-12-01T09:30"), ("f4_tz", "+05:30"), ("f5", "3"), ("f6", "99.5"),
             ("f7", "on"), ("f8", "cold"), ("f9", "kyo"), ("f10", ""), ("f11", "hiking"), ("f11", "beach"),
             ("f12", "pk"), ("action", "accept"), ("f99", "ignored")]
    content = content_from_raw(FORM, raw_from_items(FORM, items))
    checked, errors = FORM.validate(content)
    assert not errors
    assert checked == {"name": "Ada Lovelace", "email": "ada@example.com", "homepage": "https://example.org/ada",
                       "start": "2026-12-01", "pickup": "2026-12-01T09:30:00+05:30", "travellers": 3,
                       "budget": 99.5, "window": True, "climate": "cold", "city": "kyo",
                       "activities": ["hiking", "beach"], "extras": ["pk"]}
    assert type(checked["travellers"]) is int and type(checked["budget"]) is float


def test_an_optional_boolean_can_stay_unset_and_a_ticked_or_unticked_box_always_has_a_value() -> None:
    unset = content_from_raw(OPTIONAL_FLAGS, raw_from_items(OPTIONAL_FLAGS, [("f0", ""), ("f2", "c")]))
    assert unset == {"sure": False, "pet": "c"}
    answered = content_from_raw(OPTIONAL_FLAGS, raw_from_items(OPTIONAL_FLAGS, [("f0", "no"), ("f1", "on")]))
    assert answered == {"maybe": False, "sure": True}
    maybe = field_views(OPTIONAL_FLAGS, raw_from_content(OPTIONAL_FLAGS, {"maybe": True}))[0]
    assert [(c.label, c.chosen) for c in maybe.choices] == [("Yes", True), ("No", False), ("Not set", False)]


def test_textarea_line_ends_are_normalised_and_bad_values_pass_through_for_validation_to_explain() -> None:
    content = content_from_raw(OPTIONAL_FLAGS, raw_from_items(OPTIONAL_FLAGS, [("f3", "one\r\ntwo\r\n")]))
    assert content["note"] == "one\ntwo"
    typed = content_from_raw(FORM, raw_from_items(FORM, [("f4", "tomorrow"), ("f5", "lots")]))
    assert typed["pickup"] == "tomorrow" and typed["travellers"] == "lots"
    _, errors = FORM.validate(typed)
    assert errors.fields["travellers"] == "'lots' is not a number"


@pytest.mark.parametrize(("stamp", "local", "zone"), [
    ("2026-01-31T09:30:00Z", "2026-01-31T09:30", "+00:00"),
    ("2026-01-31T09:30:15+05:45", "2026-01-31T09:30:15", "+05:45"),
    ("2026-01-31T23:00:00-03:30", "2026-01-31T23:00", "-03:30"),
    ("not a date", "not a date", "+00:00"),
])
def test_date_times_convert_to_datetime_local_and_an_offset_and_back(stamp: str, local: str, zone: str) -> None:
    assert split_datetime(stamp) == (local, zone)
    if stamp != "not a date":
        assert join_datetime(local, zone) == stamp


def test_a_default_with_seconds_or_an_unusual_offset_is_shown_as_it_is() -> None:
    form = form_from_schema({"type": "object", "properties": {
        "at": {"type": "string", "format": "date-time", "default": "2026-01-31T09:30:15+00:20"}}})
    view = field_views(form, raw_from_content(form, form.defaults()))[0]
    assert (view.value, view.zone, dict(view.attrs)) == ("2026-01-31T09:30:15", "+00:20", {"step": "1"})
    assert view.zones[-1] == "+00:20"


def test_server_text_is_cut_to_a_bound() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {
        "x": {"type": "string", "title": "T" * 500, "description": "D" * 5000}}}
    view = field_views(form_from_schema(schema), {})[0]
    assert len(view.title) == 200 and len(view.description) == 1000 and view.title.endswith("…")
