"""The bounds' pure parts: sizes in the config, counters and caches that forget, measured memory of the form cache."""

from __future__ import annotations

import gc
import json
import tracemalloc
from typing import Any

import pytest

from bridge.config.file import from_mapping
from bridge.door.forms import schema as form_schema
from bridge.errors import ConfigError, UnsupportedSchema
from bridge.safety.limits import CardKeys, Limits, OpenCards, parse_size, schema_problem
from bridge.safety.ratelimit import RateLimiter


def test_limits_come_from_the_config_with_sizes_in_units() -> None:
    config = from_mapping({"limits": {"schema_size": "64KB", "tool_result_size": "2MB", "open_cards_per_call": 3}})
    assert config.limits.schema_size == 64 * 1024
    assert config.limits.tool_result_size == 2 * 1024**2
    assert config.limits.open_cards_per_call == 3
    assert config.limits.open_cards_per_person == Limits().open_cards_per_person
    assert [parse_size(v) for v in (10, "10", "1k", "1 KB", "3mb", "1G")] == [10, 10, 1024, 1024, 3 * 1024**2,
                                                                              1024**3]


def test_bad_limits_are_config_errors_naming_the_key() -> None:
    with pytest.raises(ConfigError) as caught:
        from_mapping({"limits": {"schema_size": "64 parsecs", "open_cards_per_call": 0, "cards": 3}})
    assert caught.value.problems == ["limits: unknown key cards",
                                     "limits.open_cards_per_call: is out of range (minimum 1)",
                                     "limits.schema_size: must be a size like 64KB or 1MB"]


def test_the_rate_limiter_forgets_idle_keys_and_caps_the_rest() -> None:
    now = [0.0]
    limiter = RateLimiter(2, window=60.0, clock=lambda: now[0], max_keys=1000)
    for n in range(100_000):
        assert limiter.allow(("conversation", n))
    assert len(limiter) == 1000  # capped, not 100 000
    assert limiter.allow("busy") and limiter.allow("busy") and not limiter.allow("busy")
    now[0] = 61.0
    assert limiter.allow("fresh")
    assert len(limiter) == 1  # every key idle for a whole window is gone
    assert limiter.allow("busy")  # and a forgotten key starts over, as it would have after the window anyway


def test_open_cards_count_each_bound_and_forget_what_closed() -> None:
    cards = OpenCards(Limits(open_cards_per_conversation=3, open_cards_per_person=2, open_cards_per_call=5))
    a1, a2 = CardKeys("room", "alice", "call-1"), CardKeys("room", "alice", "call-2")
    assert cards.take(a1) is None and cards.take(a2) is None
    assert cards.take(a1) == "2 requests already wait for this person"
    assert cards.take(CardKeys("room", "bob", "call-3")) is None
    assert cards.take(CardKeys("room", "carol", "call-4")) == "this conversation already has 3 open requests"
    for keys in (a1, a2, CardKeys("room", "bob", "call-3")):
        cards.release(keys)
    assert cards.open("conversation", "room") == 0 and cards._counts == {}


def test_schema_problems_are_found_before_the_form_is_built() -> None:
    limits = Limits(schema_fields=2, schema_options=3, schema_size=1000)
    assert schema_problem({"type": "object", "properties": {"a": {}, "b": {}, "c": {}}}, limits) == \
        "the form has 3 fields; this bridge shows at most 2"
    many = {"type": "array", "items": {"anyOf": [{"const": str(i)} for i in range(4)]}}
    assert schema_problem({"type": "object", "properties": {"m": many}}, limits) == \
        "the field 'm' has 4 options; this bridge shows at most 3"
    assert schema_problem({"type": "object", "properties": {"a": {"title": "é" * 600}}}, limits) == \
        "the form's schema takes 1 KB; this bridge takes at most 1 KB"
    assert schema_problem({"type": "object", "properties": {"a": {"type": "string"}}}, limits) is None


def test_a_form_built_once_is_still_measured_against_each_host_s_limits() -> None:
    """The form cache is the process's, the limits a host's: a schema one host showed is refused by a stricter one,
    and one refused for its size is neither built nor kept."""
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string", "title": "B ü"}}}
    form = form_schema.form_from_schema(schema, Limits())
    assert form_schema.form_from_schema(schema, Limits()) is form  # built once
    with pytest.raises(UnsupportedSchema, match="the form has 2 fields; this bridge shows at most 1"):
        form_schema.form_from_schema(schema, Limits(schema_fields=1))
    used = form_schema.cache_used()
    big = {"type": "object", "properties": {"a": {"type": "string", "title": "é" * 600}}}
    with pytest.raises(UnsupportedSchema, match="takes 1 KB; this bridge takes at most 1 KB"):
        form_schema.form_from_schema(big, Limits(schema_size=1000))
    assert form_schema.cache_used() == used
    assert form_schema.form_from_schema(big, Limits()).fields[0].title == "é" * 600


def _schema(n: int, size: int) -> dict[str, Any]:
    return {"type": "object", "properties": {
        f"f{i}": {"type": "string", "title": f"field {n}.{i}", "description": "x" * (size // 100)}
        for i in range(100)}}


def test_the_form_cache_is_bounded_by_bytes() -> None:
    """Twenty distinct 1 MB schemas: with a 4 MB cache, what stays in memory afterwards is about 4 MB, not 80."""
    form_schema.set_cache_size(4 * 1024**2)
    try:
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for n in range(20):
            schema = _schema(n, 1024**2)
            assert len(json.dumps(schema)) > 1024**2
            form_schema.form_from_schema(schema)
            del schema
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        assert form_schema.cache_used() <= 4 * 1024**2
        assert kept < 8 * 1024**2
    finally:
        form_schema.set_cache_size(form_schema.CACHE_SIZE)

