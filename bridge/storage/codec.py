"""How the store writes values as JSON text columns and reads them back (pure): people, outcomes, interactions, and
the rows built from them.

The format is that of the synchronous store that came before (`bridge.store`, kept frozen in
`tests/storage/legacy_store.py`), so a file it wrote is read as is (migration 1 is its schema). Readers accept rows
written before a field existed (its default is used), so an older store opens unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from bridge.door.forms import Form, form_from_schema
from bridge.door.model import (
    Actor,
    CardRef,
    ConversationKey,
    Detail,
    GrantOption,
    Interaction,
    Kind,
    Outcome,
    ServerLabel,
    Status,
)
from bridge.storage import audit as chain
from bridge.storage.rows import AuditRow, PendingCall, StoredInteraction

INTERACTION_COLUMNS = "body, status, card, pending_call, input_key, outcome, id, parked"
PENDING_COLUMNS = ("id, conversation, server, tool, arguments, request_state, input_requests, requester, created_at,"
                   " approval")
PENDING_READ = f"{PENDING_COLUMNS}, sent_by"
AUDIT_COLUMNS = ", ".join(chain.FIELDS)

_JSON = json.JSONEncoder()
"""`json.dumps` with its defaults, built once: the same text, without building an encoder per value (several values
are written on every decision)."""


def dump(value: Any) -> str:
    """`json.dumps(value)`."""
    return _JSON.encode(value)


def dump_actor(actor: Actor | None) -> str | None:
    return _JSON.encode([actor.platform, actor.user_id, actor.display_name]) if actor else None


def load_actor(text: str | None) -> Actor | None:
    if not text:
        return None
    platform, user_id, name = json.loads(text)
    return Actor(platform, user_id, name)


def dump_outcome(outcome: Outcome) -> str:
    # `str()` of a StrEnum member is its value, without the `value` property's two calls.
    return _JSON.encode({"status": str(outcome.status), "content": dict(outcome.content) if outcome.content else None,
                       "by": dump_actor(outcome.by), "reason": outcome.reason, "grant": outcome.grant,
                       "approvals": [dump_actor(a) for a in outcome.approvals]})


def load_outcome(text: str | None) -> Outcome | None:
    if not text:
        return None
    data = json.loads(text)
    return Outcome(Status(data["status"]), data["content"], load_actor(data["by"]), data["reason"],
                   tuple(filter(None, map(load_actor, data.get("approvals", ())))), data.get("grant", ""))


def dump_interaction(i: Interaction) -> str:
    return _JSON.encode({
        "id": i.id, "kind": str(i.kind), "server": [i.server.name, i.server.title],
        "conversation": i.conversation.id(), "requester": dump_actor(i.requester), "approvers": sorted(i.approvers),
        "message": i.message, "schema": dict(i.form.schema), "expires_at": i.expires_at,
        "details": [[d.label, d.text, d.full_length] for d in i.details], "url": i.url,
        "accept_label": i.accept_label, "decline_label": i.decline_label, "quick_accept": i.quick_accept,
        "tool": i.tool, "required": i.required, "groups": list(i.groups), "notify": i.notify, "asked": list(i.asked),
        "grants": [[g.scope, g.label] for g in i.grants], "private": i.private,
        "request": i.request,
    })


def load_interaction(text: str) -> Interaction:
    d = json.loads(text)
    form = form_from_schema(d["schema"]) if d["schema"] else Form()
    return Interaction(
        id=d["id"], kind=Kind(d["kind"]), server=ServerLabel(*d["server"]),
        conversation=ConversationKey.from_id(d["conversation"]), requester=load_actor(d["requester"]),
        approvers=frozenset(d["approvers"]), message=d["message"], form=form, expires_at=d["expires_at"],
        details=tuple(Detail(*x) for x in d["details"]), url=d["url"], accept_label=d["accept_label"],
        decline_label=d["decline_label"], quick_accept=d["quick_accept"], tool=d["tool"],
        required=d.get("required", 1), groups=tuple(d.get("groups", ())), notify=d.get("notify", "thread"),
        asked=tuple(d.get("asked", ())), grants=tuple(GrantOption(*g) for g in d.get("grants", ())),
        private=bool(d.get("private", False)), request=str(d.get("request", "")),
    )


def stored_interaction(row: Sequence[Any]) -> StoredInteraction:
    """A row of `INTERACTION_COLUMNS`."""
    body, status, card, pending_call, input_key, outcome, interaction_id, parked = row
    return StoredInteraction(
        interaction=load_interaction(body), status=Status(status),
        card=CardRef(interaction_id, json.loads(card)) if card else None,
        pending_call=pending_call, input_key=input_key, outcome=load_outcome(outcome), parked=bool(parked),
    )


def pending_call(row: Sequence[Any]) -> PendingCall:
    """A row of `PENDING_COLUMNS`, then `sent_by` (`PENDING_READ`)."""
    return PendingCall(row[0], ConversationKey.from_id(row[1]), row[2], row[3], json.loads(row[4]), row[5],
                       json.loads(row[6]), load_actor(row[7]), row[8], row[10], approval=row[9])


def audit_row(row: Sequence[Any]) -> AuditRow:
    """A row of `AUDIT_COLUMNS, id, hash, key_id, chain`."""
    return AuditRow(*row)


def audit_values(interaction: Interaction, outcome: Outcome, detail: str, at: float) -> tuple[Any, ...]:
    """The values of `AUDIT_COLUMNS` for one outcome. A tool approval's detail names the tool (the server is a
    column of its own)."""
    detail = detail or outcome.reason
    if interaction.tool:
        detail = f"tool {interaction.tool}" + (f": {detail}" if detail else "")
    return (at, interaction.id, str(interaction.kind), interaction.server.name, interaction.conversation.id(),
            str(outcome.status), outcome.by.key if outcome.by else None, outcome.by.label() if outcome.by else None,
            interaction.requester.key if interaction.requester else None, detail)


def row_values(row: AuditRow) -> tuple[Any, ...]:
    """The values of `AUDIT_COLUMNS` of a row given whole (`AsyncStore.record`)."""
    return (row.at, row.interaction_id, row.kind, row.server, row.conversation, row.outcome, row.actor,
            row.actor_name, row.requester, row.detail)


def pending_values(call: PendingCall, at: float) -> tuple[Any, ...]:
    """The values of `PENDING_COLUMNS` for one call (stamped `at` unless the round was stamped when it came)."""
    return (call.id, call.conversation.id(), call.server, call.tool, _JSON.encode(dict(call.arguments)),
            call.request_state, _JSON.encode(dict(call.input_requests)), dump_actor(call.requester),
            call.created_at or at, call.approval)
