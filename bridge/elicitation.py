"""Elicitation: a server's form or URL request turned into an interaction, and the outcome turned back.

The same functions serve both eras: legacy servers reach them through the SDK's elicitation callback while the tool
call stays open; 2026-07-28 servers through the host's own `input_required` driver.
"""

from __future__ import annotations

from typing import Any

from mcp.types import ElicitRequestFormParams, ElicitRequestURLParams, ElicitResult

from bridge.context import RequestContext, new_id
from bridge.forms import Form, form_from_schema
from bridge.model import Detail, Interaction, Kind, Outcome, Status
from bridge.text import shorten, url_host

MAX_MESSAGE = 2000


def form_interaction(ctx: RequestContext, params: ElicitRequestFormParams, timeout: float) -> Interaction:
    """Raises UnsupportedSchema when the schema is outside the subset."""
    form = form_from_schema(params.requested_schema)
    return Interaction(
        id=new_id(), kind=Kind.FORM, server=ctx.server, conversation=ctx.conversation, requester=ctx.requester,
        approvers=ctx.approvers, message=shorten(params.message, MAX_MESSAGE), form=form,
        expires_at=ctx.deadline(timeout), accept_label="Submit", decline_label="Decline", tool=ctx.tool,
    )


def url_interaction(ctx: RequestContext, params: ElicitRequestURLParams, timeout: float) -> Interaction:
    return Interaction(
        id=new_id(), kind=Kind.URL, server=ctx.server, conversation=ctx.conversation, requester=ctx.requester,
        approvers=ctx.approvers, message=shorten(params.message, MAX_MESSAGE), form=Form(),
        expires_at=ctx.deadline(timeout), url=params.url, details=(Detail("Host", url_host(params.url)),),
        accept_label="Done", decline_label="Decline", quick_accept=True, tool=ctx.tool,
    )


def to_result(outcome: Outcome) -> ElicitResult:
    if outcome.status is Status.ACCEPTED:
        content: Any = dict(outcome.content) if outcome.content is not None else None
        return ElicitResult(action="accept", content=content)
    return ElicitResult(action=outcome.action)
