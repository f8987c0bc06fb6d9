"""What `pending`, `grants` and `usage` show, as lines and as JSON: one wording for the chat commands and the
operator's CLI (`mcp-chat-bridge pending -c FILE`), which read the same store."""

from __future__ import annotations

from typing import Any

from bridge.door.model import Interaction
from bridge.requests.budgets import Standing
from bridge.requests.grants import Grant
from bridge.text.durations import time_left
from bridge.text.plain import shorten


def pending_line(i: Interaction, now: float) -> str:
    return (f"• {i.id}: {i.server.text()}, {i.kind.value}, waits for "
            f"{i.requester.label() if i.requester else 'an approver'}, expires in "
            f"{time_left(i.expires_at - now)}: {shorten(i.message, 120)}")


def pending_json(i: Interaction) -> dict[str, Any]:
    return {"id": i.id, "conversation": i.conversation.id(), "server": i.server.name, "kind": i.kind.value,
            "requester": i.requester.key if i.requester else None, "expires_at": i.expires_at,
            "message": i.message}


def grant_json(g: Grant) -> dict[str, Any]:
    return {"id": g.id, "kind": g.kind, "server": g.server, "tool": g.tool if g.kind == "tool" else None,
            "scope": g.scope, "place": g.place, "given_by": g.given_by.key, "created_at": g.created_at,
            "expires_at": g.expires_at}


def standing_json(s: Standing) -> dict[str, Any]:
    kind, _, who = s.subject.partition(":")
    return {"subject": kind, "id": who, "tokens": s.used, "limit": s.limit}
