"""Grants: an approval that holds beyond one call ("Allow in this channel until revoked"), scoped and expiring.

A grant names what it allows (a server's tool, or a server's use of the model), where (one conversation, or a whole
channel), who gave it, and until when. It is stored, listed by `grants`, ended by `revoke <id>`, and every call it
lets through is an audit row naming it. Grants are only offered and only used where one person's approval is enough:
a rule that needs several approvers is never satisfied by a grant.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from bridge.cards.chat import Say
from bridge.config.team import GrantScope, duration_text
from bridge.door.model import Actor, ConversationKey, GrantOption, Outcome
from bridge.requests.request_context import RequestContext, new_id
from bridge.storage import AuditRow
from bridge.storage.api import AuditLog, GrantStore
from bridge.storage.codec import dump_actor, load_actor


class GrantRecords(GrantStore, AuditLog, Protocol):
    """What grants need of the store: the grants, and the audit rows of their use and revocation."""


@dataclass(frozen=True, slots=True)
class Grant:
    id: str
    kind: str
    """`tool` or `sampling`."""
    server: str
    tool: str
    scope: str
    place: str
    given_by: Actor
    created_at: float
    expires_at: float | None

    def what(self) -> str:
        return f"{self.server}.{self.tool}" if self.kind == "tool" else f"{self.server} using the model"

    def describe(self, now: float) -> str:
        where = "in this conversation" if self.scope == "conversation" else "in this channel"
        until = "until revoked" if self.expires_at is None else \
            f"for {duration_text(max(60.0, round((self.expires_at - now) / 60) * 60))} more"
        return f"{self.id}: {self.what()} {where} {until}, given by {self.given_by.label()}"


def place(scope: str, conversation: ConversationKey) -> str:
    """Where a grant holds: the conversation itself, or its whole channel."""
    if scope == "conversation":
        return conversation.id()
    return "/".join((conversation.platform, conversation.workspace, conversation.channel))


def offers(scopes: tuple[GrantScope, ...]) -> tuple[GrantOption, ...]:
    return tuple(GrantOption(s.scope, s.label()) for s in scopes)


class Grants:
    def __init__(self, store: GrantRecords, say: Say, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._say = say
        self.clock = clock
        """Wall-clock seconds; tests pass a virtual clock to see grants expire."""

    async def here(self, conversation: ConversationKey) -> list[Grant]:
        """The grants that hold in this conversation now (its own and its channel's)."""
        places = [place("conversation", conversation), place("channel", conversation)]
        return [_load(body) for body in await self._store.grants(places, self.clock())]

    async def everywhere(self) -> list[Grant]:
        """Every grant that holds now, wherever it holds (the operator's `grants`)."""
        return [_load(body) for body in await self._store.all_grants(self.clock())]

    async def find(self, kind: str, server: str, tool: str, conversation: ConversationKey) -> Grant | None:
        here = await self.here(conversation)
        return next((g for g in here if (g.kind, g.server, g.tool) == (kind, server, tool)), None)

    async def give(self, kind: str, server: str, tool: str, scope: GrantScope, conversation: ConversationKey,
             by: Actor) -> Grant:
        now = self.clock()
        grant = Grant(f"g{new_id()[:8]}", kind, server, tool, scope.scope, place(scope.scope, conversation), by, now,
                      None if scope.ttl is None else now + scope.ttl)
        await self._store.save_grant(grant.id, grant.place, grant.expires_at, _dump(grant))
        return grant

    async def remember(self, ctx: RequestContext, outcome: Outcome, scopes: tuple[GrantScope, ...], kind: str,
                       tool: str) -> Grant | None:
        """Store the grant an approver chose with their accept (if any), and say so where it holds."""
        scope = next((s for s in scopes if s.scope == outcome.grant), None)
        if scope is None or outcome.by is None:
            return None
        grant = await self.give(kind, ctx.server.name, tool, scope, ctx.conversation, outcome.by)
        await self._say(ctx.conversation, f"{outcome.by.label()} allowed {grant.what()} "
                                          f"{scope.label().removeprefix('Allow ')} (grant {grant.id}; "
                                          f"`revoke {grant.id}` ends it).")
        return grant

    async def revoke(self, grant: Grant, by: Actor) -> bool:
        return await self._store.revoke_grant(grant.id, by.key)

    async def used(self, grant: Grant, call_id: str, conversation: ConversationKey, requester: Actor | None) -> None:
        """The audit row of one call a grant let through: the grant, who gave it, whose call it was."""
        await self._store.record(AuditRow(
            self.clock(), call_id, grant.kind, grant.server, conversation.id(), "granted", grant.given_by.key,
            grant.given_by.label(), requester.key if requester else None,
            f"auto-approved by grant {grant.id} ({grant.what()}, {grant.scope}, given by {grant.given_by.label()})"))


def _dump(g: Grant) -> str:
    return json.dumps({"id": g.id, "kind": g.kind, "server": g.server, "tool": g.tool, "scope": g.scope,
                       "place": g.place, "by": dump_actor(g.given_by), "at": g.created_at, "until": g.expires_at})


def _load(body: str) -> Grant:
    d = json.loads(body)
    by = load_actor(d["by"])
    assert by is not None
    return Grant(d["id"], d["kind"], d["server"], d["tool"], d["scope"], d["place"], by, d["at"], d["until"])
