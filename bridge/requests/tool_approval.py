"""Tool approval: a risky tool call waits for a person (or several) before it runs.

The fourth handler of the table, asked by the tool-call owner before it sends `tools/call` (rather than by a
server). `required` is the cheap check made for every call: the configured rules (the channel's, then the server's)
first, then the tool's annotations from the session's cached tool list. `answer` posts the card and returns None to go
ahead, or the tool error the caller (a person, or the agent) reads instead. A grant given earlier ("Allow in this
channel until revoked") lets the call through without a card, with an audit row naming it, except where the rule needs
several approvers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp.types import CallToolRequestParams, CallToolResult, ErrorData, TextContent

from bridge.config.file import Config
from bridge.config.policy import approver_rule, configured_verdict, mask_arguments, needs_approval
from bridge.door.model import ConversationKey, Detail, Kind, Status
from bridge.requests.grants import Grants, offers
from bridge.requests.receipting import Receipting
from bridge.requests.request_context import (
    Asker,
    ContextSource,
    RequestContext,
    RequestHandler,
    new_id,
    new_interaction,
)
from bridge.safety.receipts.canonical import tool_digest
from bridge.servers.mcp_session import Session
from bridge.servers.sessions import SessionPool
from bridge.text.grammar import acts
from bridge.text.plain import shorten
from bridge.text.presentation import describe_outcome


@dataclass(frozen=True, slots=True)
class Approved:
    """Go ahead: the call runs, with `meta` (its receipt, when a person or a grant approved it) in its `_meta`."""

    meta: dict[str, Any] | None = None
    approval: str | None = None
    """The card people accepted, or the grant that let the call through (their ids): a 2026 call stores it, to carry
    a receipt of the same approval after a restart."""


class ToolApproval(RequestHandler[CallToolRequestParams, CallToolResult | None]):
    def __init__(self, contexts: ContextSource, asker: Asker, config: Config, pool: SessionPool,
                 grants: Grants, receipts: Receipting | None = None) -> None:
        super().__init__(contexts, asker)
        self._config = config
        self._pool = pool
        self._grants = grants
        self._receipts = receipts

    def known(self, session: Session, conversation: ConversationKey, tool_name: str) -> bool | None:
        """Whether calling `tool_name` needs approval, when that is known without asking the server (the rules
        decide, or the tool is in the session's cached list); None when the tool list must be fetched."""
        by_rule = configured_verdict(self._config, conversation, session.server, tool_name)
        if by_rule is not None:
            return by_rule  # the rules decide: the tool list is not needed
        tool = session.tools.get(tool_name) if session.tools is not None else None
        return None if tool is None else needs_approval((), tool_name, tool.annotations)

    async def required(self, session: Session, conversation: ConversationKey, tool_name: str) -> bool:
        """Whether calling `tool_name` on `session` needs a person's approval first."""
        known = self.known(session, conversation, tool_name)
        if known is not None:
            return known
        tool = await self._pool.tool(session, tool_name)
        return needs_approval((), tool_name, tool.annotations if tool else None)

    async def answer(self, ctx: RequestContext, params: CallToolRequestParams) -> CallToolResult | ErrorData | None:
        decided = await self.decide(ctx, params)
        return None if isinstance(decided, Approved) else decided

    async def decide(self, ctx: RequestContext, params: CallToolRequestParams) -> CallToolResult | Approved:
        """Ask (when the call needs it) and return the tool error people read instead, or `Approved` with the
        receipt the `tools/call` carries."""
        server, tool_name = ctx.server.name, params.name
        cfg = self._config.servers.get(server)
        if cfg is None or cfg.disabled:
            return Approved()  # the pool reports it
        session = await self._pool.get(ctx.conversation, server, ctx.requester)
        with self._pool.hold(session):
            if not await self.required(session, ctx.conversation, tool_name):
                return Approved()
            tool = await self._pool.tool(session, tool_name)
        request = tool_digest(tool_name, params.arguments)
        quorum = approver_rule(cfg, Kind.TOOL, tool_name).required > 1
        grant = None if quorum else await self._grants.find("tool", server, tool_name, ctx.conversation)
        if grant is not None:
            await self._grants.used(grant, new_id(), ctx.conversation, ctx.requester)
            if self._receipts is None:
                return Approved(approval=grant.id)
            return Approved(await self._receipts.for_grant(server, ctx.conversation.id(), tool_name, request,
                                                           grant.id, grant.given_by, ctx.requester), grant.id)
        who = ctx.requester.label() if ctx.requester else "the agent"
        about = f": {shorten(tool.description or '', 300)}" if tool and tool.description else ""
        interaction = new_interaction(
            ctx, Kind.TOOL, f"{acts(who, 'wants', start=True)} to run {server}.{tool_name}.", timeout=cfg.tool_timeout,
            details=(Detail("Tool", f"{server}.{tool_name}{about}"),
                     Detail("Arguments", mask_arguments(params.arguments or {})), Detail("Asked by", who)),
            accept_label="Run", decline_label="Deny", quick_accept=True, grants=offers(cfg.tool_grants),
            request=request)
        outcome = await self.ask(ctx, interaction)
        if outcome.status is Status.ACCEPTED:
            await self._grants.remember(ctx, outcome, cfg.tool_grants, "tool", tool_name)
            if self._receipts is None:
                return Approved(approval=interaction.id)
            return Approved(await self._receipts.for_decision(interaction, outcome), interaction.id)
        text = f"The call to {tool_name} was not run: {describe_outcome(outcome)}."
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)

