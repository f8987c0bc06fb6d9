"""Interactions for rendering tests, built the way the core builds them (forms from real requested schemas)."""

from __future__ import annotations

import time
from typing import Any

from bridge.door.forms import Field, FieldKind, Form, Option, approval_form, form_from_schema
from bridge.door.model import Actor, ConversationKey, Detail, Interaction, Kind, ServerLabel

ADA = Actor("slack", "U1", "Ada Lovelace")
BOB = Actor("slack", "U2", "Charles Babbage")
ROOM = ConversationKey("slack", "T111", "C1", "1700000000.000100")

EVERY_FIELD: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name", "minLength": 2, "maxLength": 50},
        "bio": {"type": "string", "title": "Bio", "maxLength": 5000},
        "email": {"type": "string", "format": "email", "default": "a@example.com"},
        "site": {"type": "string", "format": "uri"},
        "day": {"type": "string", "format": "date", "default": "2026-01-31"},
        "when": {"type": "string", "format": "date-time", "default": "2026-01-31T09:30:00Z"},
        "count": {"type": "integer", "minimum": 1, "maximum": 100, "default": 42},
        "ratio": {"type": "number", "minimum": 0, "maximum": 1.5, "default": 0.25},
        "ok": {"type": "boolean", "default": True},
        "size": {"type": "string", "enum": ["s", "m", "l"], "default": "m"},
        "color": {"type": "string", "oneOf": [{"const": f"c{i}", "title": f"Colour {i}"} for i in range(8)]},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "default": ["b"]},
        "many": {"type": "array", "maxItems": 3,
                 "items": {"anyOf": [{"const": f"m{i}", "title": f"Item {i}"} for i in range(20)]}},
    },
    "required": ["name", "count"],
}


def interaction(kind: Kind = Kind.FORM, *, form: Form | None = None, message: str = "Please answer.",
                server: ServerLabel | None = None, **fields: Any) -> Interaction:
    defaults: dict[str, Any] = {
        "id": "abc12345", "kind": kind, "server": server or ServerLabel("everything", "Everything Server"),
        "conversation": ROOM, "requester": ADA, "approvers": frozenset({ADA.key}), "message": message,
        "form": form if form is not None else Form(), "expires_at": time.time() + 600,
    }
    return Interaction(**(defaults | fields))


def form(schema: dict[str, Any]) -> Form:
    return form_from_schema(schema)


def one_field(prop: dict[str, Any], required: bool = True) -> Form:
    return form({"type": "object", "properties": {"answer": prop}, "required": ["answer"] if required else []})


def sampling() -> Interaction:
    edit = approval_form([Field("prompt", FieldKind.TEXT, "Prompt", default="What is 6 × 7?", has_default=True,
                                multiline=True, required=True)])
    return interaction(Kind.SAMPLING, form=edit, message="The server wants the model to answer a prompt.",
                       details=(Detail("System prompt", "Be terse."), Detail("Prompt", "What is 6 × 7?")),
                       accept_label="Approve", decline_label="Deny", quick_accept=True)


def tool_approval() -> Interaction:
    return interaction(Kind.TOOL, message="delete_repo is marked destructive.", tool="delete_repo",
                       details=(Detail("Arguments", '{"repo": "ada/engine"}'),),
                       accept_label="Approve", decline_label="Deny", quick_accept=True)


def roots() -> Interaction:
    pick = approval_form([Field("roots", FieldKind.MULTI, "Folders", required=True,
                                options=(Option("file:///srv/a", "a"), Option("file:///srv/b", "b")))])
    return interaction(Kind.ROOTS, form=pick, message="Which folders may the server see?", accept_label="Share",
                       decline_label="Deny")

