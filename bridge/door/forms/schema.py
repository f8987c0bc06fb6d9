"""An elicitation `requestedSchema` turned into a `Form`, or refused with the reason.

The schema subset is the one the MCP spec allows (2025-11-25 and 2026-07-28): a flat object of strings (min/max
length, formats email, uri, date, date-time), numbers and integers (min/max), booleans, single-select enums (plain
`enum`, titled `oneOf`, legacy `enumNames`) and multi-select arrays (`items.enum`, `items.anyOf`, min/maxItems).
Anything else raises `UnsupportedSchema` with the reason, which the bridge sends back as -32602. Fields whose name or
title names a secret are flagged (`bridge.safety.secret_names`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

import jsonschema
from jsonschema import Draft202012Validator

from bridge.door.forms.model import STRING_FORMATS, Field, FieldKind, Form, Option
from bridge.errors import UnsupportedSchema
from bridge.safety.limits import Limits, SchemaShape, schema_shape, shape_problem
from bridge.safety.lru import ByteLRU
from bridge.safety.secret_names import looks_secret

_ARRAYS_ONLY = "{where}: arrays are only allowed as multi-select enums (items.enum or items.anyOf)"
_ALLOWED_TOP = {"type", "properties", "required", "$schema", "title", "description", "additionalProperties"}
_ALLOWED_COMMON = {"type", "title", "description", "default"}
CACHE_SIZE = 16 * 1024**2
ENTRY_OVERHEAD = 4
"""A built form holds its schema as Python objects besides the JSON key: about four times the key's size."""
_KEY = json.JSONEncoder(ensure_ascii=False)
"""The cache's key, `json.dumps(schema, ensure_ascii=False)`, with the encoder built once (a key per request)."""
_CACHE: ByteLRU[str, tuple[Form | UnsupportedSchema, SchemaShape]] = ByteLRU(CACHE_SIZE)


def set_cache_size(size: int) -> None:
    """Bound the form cache (the config's `limits.form_cache_size`)."""
    _CACHE.resize(size)


def cache_used() -> int:
    return _CACHE.used


def form_from_schema(schema: Mapping[str, Any], limits: Limits | None = None) -> Form:
    """Build a `Form` from an elicitation `requestedSchema`.

    Forms are immutable, so one is built once per distinct schema: servers ask the same form again and again, and
    checking a schema against the JSON Schema metaschema costs milliseconds. The cache is bounded by bytes
    (`set_cache_size`), so large schemas cannot pin memory; a refusal is remembered as well. With `limits`, a schema
    over them (fields, options, bytes) is refused before it is built; its measure is kept with the form, so the
    schema is encoded once per request and measured once per distinct schema.

    Raises:
        UnsupportedSchema: the schema is outside the restricted subset or over `limits`; the message says which part
            and why.
    """
    if not isinstance(schema, Mapping):
        raise UnsupportedSchema("requestedSchema must be an object")
    try:
        key = _KEY.encode(schema)  # key order is field order, so it stays part of the key
    except (TypeError, ValueError):
        raise UnsupportedSchema("requestedSchema must be plain JSON") from None
    cached = _CACHE.get(key)
    if cached is None:
        shape = schema_shape(schema, key)
        if limits is not None and (too_large := shape_problem(shape, limits)) is not None:
            raise UnsupportedSchema(too_large)  # neither built nor kept: an oversized schema costs one pass
        try:
            built: Form | UnsupportedSchema = _build_form(json.loads(key))
        except UnsupportedSchema as exc:
            built = exc
        cached = (built, shape)
        _CACHE.put(key, cached, ENTRY_OVERHEAD * len(key))
    built, shape = cached
    if limits is not None and (too_large := shape_problem(shape, limits)) is not None:
        raise UnsupportedSchema(too_large)
    if isinstance(built, UnsupportedSchema):
        raise UnsupportedSchema(str(built))
    return built


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
    secret = looks_secret(name, title)
    base = Field(name=name, kind=FieldKind.TEXT, title=title, description=description, required=required,
                 default=default, has_default=has_default, looks_secret=secret)

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
        low, high = _number(prop, "minimum", where), _number(prop, "maximum", where)
        minimum, maximum = _bound(low, "minimum", where), _bound(high, "maximum", where)
        if has_default and (isinstance(default, bool) or not isinstance(default, int | float)):
            raise UnsupportedSchema(f"{where}: default must be a number")
        if has_default and not _finite(default):
            raise UnsupportedSchema(f"{where}: default is larger than any number a person can enter")
        kind = FieldKind.INTEGER if kind_name == "integer" else FieldKind.NUMBER
        return replace(base, kind=kind, minimum=minimum, maximum=maximum,
                       far_minimum=low if minimum is None else None, far_maximum=high if maximum is None else None)
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
        return _titled(prop["oneOf"], f"{where}.oneOf", exclusive=True)
    names = prop.get("enumNames")
    return _plain(prop["enum"], names, f"{where}.enum")


def _plain(values: Any, names: Any, where: str) -> tuple[Option, ...]:
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        raise UnsupportedSchema(f"{where} must be a non-empty list of strings")
    if names is not None and (not isinstance(names, list) or len(names) != len(values)):
        raise UnsupportedSchema(f"{where}: enumNames must list one title per value")
    titles = [str(n) for n in names] if names is not None else values
    return _unique(Option(v, t) for v, t in zip(values, titles, strict=True))


def _titled(entries: Any, where: str, *, exclusive: bool = False) -> tuple[Option, ...]:
    if not isinstance(entries, list) or not entries:
        raise UnsupportedSchema(f"{where} must be a non-empty list of {{const, title}}")
    options: list[Option] = []
    for entry in entries:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("const"), str):
            raise UnsupportedSchema(f"{where}: every entry needs a string const")
        options.append(Option(entry["const"], str(entry.get("title", entry["const"]))))
    if exclusive and len({o.value for o in options}) != len(options):
        # Under oneOf an answer must match exactly one entry: a repeated const could never be chosen.
        raise UnsupportedSchema(f"{where} has duplicate values, so they could never be chosen")
    return _unique(options)


def _unique(options: Iterable[Option]) -> tuple[Option, ...]:
    """Options without repeats, the first of each value kept: a repeated value (completions often repeat) would make
    a card no platform accepts, and a stored one could not be shown again after a restart."""
    seen: dict[str, Option] = {}
    for option in options:
        seen.setdefault(option.value, option)
    return tuple(seen.values())


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


def _finite(value: Any) -> bool:
    """Whether a JSON number is one a person can enter: a finite float (a 400-digit integer is not; float() of it
    overflows, and every typed answer is a float first)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _bound(value: float | None, key: str, where: str) -> float | None:
    """A minimum or maximum as a field keeps it. One beyond any number a person can enter either binds nothing (a
    maximum of 1e400: kept apart from the shown bounds, as `Field.far_maximum`, and still checked) or excludes
    every answer (a minimum of 1e400), which is refused."""
    if value is None or _finite(value):
        return value
    if (value > 0) == (key == "maximum"):
        return None
    raise UnsupportedSchema(f"{where}: {key} is beyond any number a person can enter")


def _number(prop: Mapping[str, Any], key: str, where: str) -> float | None:
    value = prop.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UnsupportedSchema(f"{where}: {key} must be a number")
    return value
