"""How the store writes values as JSON and reads them back (pure): people, outcomes and interactions.

Readers accept rows written before a field existed (its default is used), so an older store opens unchanged.
"""

from __future__ import annotations

import json

from bridge.forms import Form, form_from_schema
from bridge.model import (
    Actor,
    ConversationKey,
    Detail,
    GrantOption,
    Interaction,
    Kind,
    Outcome,
    ServerLabel,
    Status,
)


def dump_actor(actor: Actor | None) -> str | None:
    return json.dumps([actor.platform, actor.user_id, actor.display_name]) if actor else None


def load_actor(text: str | None) -> Actor | None:
    if not text:
        return None
    platform, user_id, name = json.loads(text)
    return Actor(platform, user_id, name)


def dump_outcome(outcome: Outcome) -> str:
    return json.dumps({"status": outcome.status.value, "content": dict(outcome.content) if outcome.content else None,
                       "by": dump_actor(outcome.by), "reason": outcome.reason, "grant": outcome.grant,
                       "approvals": [dump_actor(a) for a in outcome.approvals]})


def load_outcome(text: str | None) -> Outcome | None:
    if not text:
        return None
    data = json.loads(text)
    return Outcome(Status(data["status"]), data["content"], load_actor(data["by"]), data["reason"],
                   tuple(filter(None, map(load_actor, data.get("approvals", ())))), data.get("grant", ""))


def dump_interaction(i: Interaction) -> str:
    return json.dumps({
        "id": i.id, "kind": i.kind.value, "server": [i.server.name, i.server.title],
        "conversation": i.conversation.id(), "requester": dump_actor(i.requester), "approvers": sorted(i.approvers),
        "message": i.message, "schema": dict(i.form.schema), "expires_at": i.expires_at,
        "details": [[d.label, d.text, d.full_length] for d in i.details], "url": i.url,
        "accept_label": i.accept_label, "decline_label": i.decline_label, "quick_accept": i.quick_accept,
        "tool": i.tool, "required": i.required, "groups": list(i.groups), "notify": i.notify, "asked": list(i.asked),
        "grants": [[g.scope, g.label] for g in i.grants], "private": i.private,
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
        private=bool(d.get("private", False)),
    )
