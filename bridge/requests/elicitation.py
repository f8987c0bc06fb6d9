"""Elicitation: a server's form or URL request turned into an interaction, and the outcome turned back.

One handler object serves both eras (see `bridge.requests.request_context.RequestHandler`): legacy servers reach it
through the SDK's elicitation callback while the tool call stays open; 2026-07-28 servers through the tool-call owner's
`input_required` driver, which dispatches through the same SDK callback table.
"""

from __future__ import annotations

from typing import Any

from mcp.types import ElicitRequestFormParams, ElicitRequestParams, ElicitRequestURLParams, ElicitResult, ErrorData

from bridge.cards.chat import Say
from bridge.config.file import Config
from bridge.door.forms.schema import form_from_schema
from bridge.door.model import Detail, Interaction, Kind, Outcome, Status
from bridge.errors import INVALID_PARAMS, UnsupportedSchema
from bridge.requests.receipting import Receipting, params_digest, with_receipt
from bridge.requests.request_context import Asker, ContextSource, RequestContext, RequestHandler, new_interaction
from bridge.safety.limits import Limits
from bridge.text.plain import shorten, url_host

MAX_MESSAGE = 2000
ELICIT = "elicitation/create"


def form_interaction(ctx: RequestContext, params: ElicitRequestFormParams, timeout: float,
                     limits: Limits | None = None) -> Interaction:
    """Raises UnsupportedSchema when the schema is outside the subset, or larger than `limits` allow."""
    form = form_from_schema(params.requested_schema, limits)
    return new_interaction(ctx, Kind.FORM, shorten(params.message, MAX_MESSAGE), form=form, timeout=timeout,
                           accept_label="Submit", decline_label="Decline",
                           request=params_digest(ELICIT, params))


def url_interaction(ctx: RequestContext, params: ElicitRequestURLParams, timeout: float) -> Interaction:
    return new_interaction(ctx, Kind.URL, shorten(params.message, MAX_MESSAGE), timeout=timeout, url=params.url,
                           details=(Detail("Host", url_host(params.url)),), accept_label="Done",
                           decline_label="Decline", quick_accept=True, request=params_digest(ELICIT, params))


def to_result(outcome: Outcome) -> ElicitResult:
    if outcome.status is Status.ACCEPTED:
        content: Any = dict(outcome.content) if outcome.content is not None else None
        return ElicitResult(action="accept", content=content)
    return ElicitResult(action=outcome.action)


async def receipted(receipts: Receipting | None, interaction: Interaction | None, outcome: Outcome) -> ElicitResult:
    """The answer to an elicitation, with its receipt when it was accepted (and receipts are on)."""
    result = to_result(outcome)
    if receipts is None or interaction is None:
        return result
    return with_receipt(result, await receipts.for_decision(interaction, outcome, content=result.content))


class Elicitation(RequestHandler[ElicitRequestParams, ElicitResult]):
    def __init__(self, contexts: ContextSource, asker: Asker, config: Config, say: Say,
                 receipts: Receipting | None = None) -> None:
        super().__init__(contexts, asker)
        self._config = config
        self._say = say
        self._receipts = receipts

    async def answer(self, ctx: RequestContext, params: ElicitRequestParams) -> ElicitResult | ErrorData:
        return await self._answer(ctx, params, self._receipts)

    async def answer_unsent(self, ctx: RequestContext, params: ElicitRequestParams) -> ElicitResult | ErrorData:
        """An answer that goes to no server (a link of a legacy -32042 error): no receipt is made or audited."""
        return await self._answer(ctx, params, None)

    async def _answer(self, ctx: RequestContext, params: ElicitRequestParams,
                      receipts: Receipting | None) -> ElicitResult | ErrorData:
        cfg = self._config.servers[ctx.server.name]
        if not cfg.elicitation_enabled:
            return ElicitResult(action="cancel")
        if isinstance(params, ElicitRequestURLParams):
            interaction = url_interaction(ctx, params, cfg.elicitation_timeout)
            if params.elicitation_id and ctx.url_elicitations is not None:
                ctx.url_elicitations[params.elicitation_id] = interaction.id
        else:
            assert isinstance(params, ElicitRequestFormParams)
            try:
                interaction = form_interaction(ctx, params, cfg.elicitation_timeout, self._config.limits)
            except UnsupportedSchema as exc:
                await self._say(ctx.conversation, f"{ctx.server.text()} asked for a form this bridge cannot show, so "
                                                  f"it was refused: {shorten(str(exc), 400)}")
                return ErrorData(code=INVALID_PARAMS, message=f"Unsupported requestedSchema: {exc}")
        return await receipted(receipts, interaction, await self.ask(ctx, interaction))
