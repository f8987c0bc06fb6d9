"""Receipts issued where decisions become MCP answers, each recorded in the audit log.

A decision that lets something happen (an approved tool call, an accepted form or URL request, an approved sampling
request and its reviewed answer, shared roots) gets a receipt (`bridge.safety.receipts`) in `_meta` of what carries it:
the `tools/call` that runs the approved tool, the elicitation or sampling result, the roots answer. Every receipt is
also an audit row of kind `receipt` whose detail names its `jti` and the token's SHA-256, so a receipt a server presents
later can be matched with the log. Nothing is issued when no key is set, or for a server with `receipts: false`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from mcp.types import Result

from bridge.config.file import Config
from bridge.door.model import Actor, Interaction, Kind, Outcome, Status
from bridge.safety.receipts.canonical import digest, request_digest, tool_digest
from bridge.safety.receipts.tokens import META_KEY, Decision, Receipt, mint
from bridge.storage import StoredInteraction
from bridge.storage.api import AuditLog
from bridge.storage.rows import AuditRow

AUDIT_KIND = "receipt"
KINDS = {Kind.TOOL: "tool", Kind.FORM: "form", Kind.URL: "url", Kind.SAMPLING: "sampling",
         Kind.SAMPLING_REVIEW: "sampling", Kind.ROOTS: "roots"}

R = TypeVar("R", bound=Result)


def deciders(outcomes: Iterable[Outcome]) -> tuple[str, ...]:
    """Every approver of these outcomes (`platform:user`), each once, in the order they decided."""
    seen: dict[str, None] = {}
    for outcome in outcomes:
        for actor in outcome.approvals or ((outcome.by,) if outcome.by is not None else ()):
            seen.setdefault(actor.key)
    return tuple(seen)


def rule_of(interaction: Interaction) -> dict[str, Any]:
    """What made the approvers enough: how many were required, of whom (people and groups)."""
    return {"required": interaction.required, "approvers": sorted(interaction.approvers),
            "groups": list(interaction.groups)}


def with_receipt(result: R, meta: Mapping[str, Any] | None) -> R:
    if not meta:
        return result
    return result.model_copy(update={"meta": {**(result.meta or {}), **meta}})


class Receipting:
    def __init__(self, config: Config, store: AuditLog) -> None:
        self._config = config
        self._store = store

    def on_for(self, server: str) -> bool:
        cfg = self._config.servers.get(server)
        return self._config.receipts.enabled and (cfg is None or cfg.receipts)

    async def for_decision(self, interaction: Interaction, outcome: Outcome, *, content: Any = None,
                           earlier: Iterable[Outcome] = ()) -> dict[str, Any] | None:
        """The `_meta` with a receipt for an accepted card (its request digest is on the interaction), or None.
        `content`: what is given back (hashed into `cnt`); `earlier`: outcomes of earlier cards of the same request
        (sampling's approval before its review), whose approvers the receipt names too."""
        if outcome.status is not Status.ACCEPTED or not interaction.request or not self.on_for(interaction.server.name):
            return None  # asked before the decision is built: with receipts off, nothing of it is needed
        decision = Decision(
            kind=KINDS[interaction.kind], server=interaction.server.name, conversation=interaction.conversation.id(),
            interaction=interaction.id, request=interaction.request, by=deciders([*earlier, outcome]),
            rule=rule_of(interaction), content=None if content is None else digest(content), tool=interaction.tool)
        return await self._issue(decision, interaction.requester)

    async def for_grant(self, server: str, conversation: str, tool: str, request: str, grant_id: str,
                        given_by: Actor, requester: Actor | None, *, kind: str = "tool",
                        content: Any = None) -> dict[str, Any] | None:
        """A receipt for a request let through by a standing grant (a tool call, or a sampling request with no
        review): `by` is who gave the grant, `rule` names it; `content` as for `for_decision`."""
        if not self.on_for(server):
            return None
        decision = Decision(kind=kind, server=server, conversation=conversation, interaction=grant_id,
                            request=request, by=(given_by.key,), rule={"grant": grant_id},
                            content=None if content is None else digest(content), tool=tool)
        return await self._issue(decision, requester)

    async def _issue(self, decision: Decision, requester: Actor | None) -> dict[str, Any]:
        """A receipt for `decision`; whoever calls has checked that receipts are on for its server (`on_for`)."""
        receipt = mint(self._config.receipts, decision)
        await self._store.record(audit_row(receipt, decision, requester))
        return {META_KEY: receipt.token}


def approval_mismatch(stored: StoredInteraction | None, server: str, conversation: str, tool: str,
                      arguments: Mapping[str, Any]) -> str | None:
    """Why a stored tool card is not an accepted approval of exactly this call (None when it is): what a receipt
    made again from it, for a call continued after a restart, must be able to stand on."""
    if stored is None:
        return "is no longer in the store (or a grant that no longer holds)"
    i, outcome = stored.interaction, stored.outcome
    if i.kind is not Kind.TOOL:
        return f"is a {i.kind.value} card, not a tool approval"
    if outcome is None or outcome.status is not Status.ACCEPTED:
        return "was not accepted"
    if (i.server.name, i.conversation.id(), i.tool) != (server, conversation, tool):
        return f"approved {i.server.name}.{i.tool} in {i.conversation.id()}, not this call"
    if i.request != tool_digest(tool, arguments):
        return "approved other arguments"
    return None


def audit_row(receipt: Receipt, decision: Decision, requester: Actor | None) -> AuditRow:
    return AuditRow(at=time.time(), interaction_id=decision.interaction, kind=AUDIT_KIND, server=decision.server,
                    conversation=decision.conversation, outcome="issued", actor=None, actor_name=None,
                    requester=requester.key if requester else None,
                    detail=f"receipt jti={receipt.jti} sha256={receipt.sha256} for {decision.kind}")


def params_digest(method: str, params: Any) -> str:
    """The digest of a server's request as it came: the params it sent (fields it left out stay out), no `_meta`."""
    body = params.model_dump(mode="json", by_alias=True, exclude_unset=True) if params is not None else {}
    return request_digest(method, body)


def result_json(result: Result, key: str) -> Any:
    """One field of a result as it travels (what a server hashes to check `cnt`)."""
    return result.model_dump(mode="json", by_alias=True, exclude_none=True).get(key)
