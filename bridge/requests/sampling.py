"""Sampling: a server asks the host's model to answer a prompt, and people stay in the loop.

The order is the spec's advice made concrete: policy first (deny, rate, caps, allowed models), then a card showing
exactly what would be sent (approve, edit the prompt, or deny), then the model, then a second card with the answer
for review (send, edit, deny) before anything goes back. With the `human` provider the reviewer writes the answer.
Caps hold even under `approval: auto`; "deny" is checked once, where the handler table leaves sampling unregistered
(the capability is not declared, and the SDK refuses for both eras). A refusal is `ErrorData(-1, ...)`, the code the
2025-11-25 spec names; on 2026 servers the call is then not retried and the conversation is told instead. What the
approver reads of the messages is what the model gets (`bridge.text.content`). Token budgets are checked before
anyone is asked and charged with what the provider reports; a grant ("this server may use the model here for 1 h")
skips the approval card, never the review, and never where the approval needs several people.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace

from mcp.types import (
    CreateMessageRequestParams,
    CreateMessageResult,
    CreateMessageResultWithTools,
    ErrorData,
    SamplingMessage,
)

from bridge.cards.chat import Say
from bridge.config.file import Config
from bridge.config.policy import approver_rule
from bridge.door.forms import Field, FieldKind, Form, approval_form
from bridge.door.model import Detail, Interaction, Kind, Outcome, Status
from bridge.errors import INTERNAL_ERROR, INVALID_PARAMS, USER_REJECTED
from bridge.llm import (
    HumanAnswerRequired,
    InvalidSamplingRequest,
    LLMError,
    LLMProvider,
    LLMResponse,
    model_hints,
    pick_model,
    to_create_message_result,
    to_llm_request,
)
from bridge.requests.budgets import Budgets
from bridge.requests.grants import Grants, offers
from bridge.requests.receipting import Receipting, params_digest, result_json, with_receipt
from bridge.requests.request_context import (
    Asker,
    ContextSource,
    RequestContext,
    RequestHandler,
    new_id,
    new_interaction,
)
from bridge.safety.ratelimit import RateLimiter
from bridge.text.content import block_text
from bridge.text.grammar import count

logger = logging.getLogger(__name__)

SamplingAnswer = CreateMessageResult | CreateMessageResultWithTools | ErrorData


class Sampler(RequestHandler[CreateMessageRequestParams, CreateMessageResult | CreateMessageResultWithTools]):
    def __init__(self, contexts: ContextSource, asker: Asker, config: Config, say: Say,
                 provider: LLMProvider, grants: Grants, budgets: Budgets, receipts: Receipting | None = None) -> None:
        super().__init__(contexts, asker)
        self._receipts = receipts
        self._config = config
        self._say = say
        self._provider = provider
        self._grants = grants
        self._budgets = budgets
        self._rates: dict[str, RateLimiter] = {}

    @property
    def supports_tools(self) -> bool:
        return self._provider.supports_tools

    async def answer(self, ctx: RequestContext, params: CreateMessageRequestParams) -> SamplingAnswer:
        cfg = self._config.servers[ctx.server.name]
        policy = cfg.sampling
        if policy.rate_per_minute is not None:
            limiter = self._rates.setdefault(ctx.server.name, RateLimiter(policy.rate_per_minute))
            if not limiter.allow(ctx.conversation.id()):
                await self._say(ctx.conversation, f"{ctx.server.text()} asked for the model more than "
                                                           f"{policy.rate_per_minute} times a minute; refused.")
                return ErrorData(code=USER_REJECTED, message="Sampling rate limit exceeded; try again later")
        over = await self._budgets.refusal(ctx.conversation, ctx.requester)
        if over is not None:
            await self._say(ctx.conversation, f"{ctx.server.text()} asked for the model; refused: {over}")
            return ErrorData(code=USER_REJECTED, message=f"Token budget exhausted: {over}")
        model = pick_model(model_hints(params), policy.models, self._provider.default_model)
        if policy.models and model not in policy.models:
            model = policy.models[0]
        try:
            request = to_llm_request(params, model=model, max_tokens_cap=policy.max_tokens)
        except InvalidSamplingRequest as exc:
            return ErrorData(code=INVALID_PARAMS, message=str(exc))

        quorum = approver_rule(cfg, Kind.SAMPLING).required > 1
        grant = None if quorum else await self._grants.find("sampling", ctx.server.name, "", ctx.conversation)
        asked = params_digest("sampling/createMessage", params)
        decided: list[tuple[Interaction, Outcome]] = []
        if policy.approval == "ask" and grant is not None:
            await self._grants.used(grant, new_id(), ctx.conversation, ctx.requester)
        elif policy.approval == "ask":
            interaction = self._approval(ctx, params, request.max_tokens, model, policy.timeout, asked)
            outcome = await self.ask(ctx.step("approve"), interaction)
            decided.append((interaction, outcome))
            if outcome.status is not Status.ACCEPTED:
                return _rejected(outcome.status)
            await self._grants.remember(ctx, outcome, policy.grants, "sampling", "")
            edited = outcome.content or {}
            system = str(edited.get("system_prompt", request.system or "")) or None
            prompt = edited.get("prompt")
            messages = list(request.messages)
            if isinstance(prompt, str) and messages and messages[-1].role == "user" and not messages[-1].tool_results:
                messages[-1] = replace(messages[-1], text=prompt)
            request = replace(request, system=system, messages=messages)

        response: LLMResponse | None
        try:
            response = await self._provider.complete(request)
        except HumanAnswerRequired:
            response = None
        except LLMError as exc:
            await self._say(ctx.conversation, f"The model failed to answer {ctx.server.text()}: {exc}")
            return ErrorData(code=INTERNAL_ERROR, message=f"The host's model failed: {exc}")
        if response is not None:
            await self._budgets.record(ctx.conversation, ctx.requester, response.usage)

        if response is None or policy.review:
            review = self._review(ctx, response, policy.timeout, asked)
            outcome = await self.ask(ctx.step("review"), review)
            if outcome.status is not Status.ACCEPTED:
                return _rejected(outcome.status)
            decided.append((review, outcome))
            if response is None or not response.tool_calls:
                text = str((outcome.content or {}).get("answer", response.text if response else ""))
                response = LLMResponse(text=text, model=response.model if response else "human",
                                       stop_reason=response.stop_reason if response else "endTurn")
        result = to_create_message_result(response)
        if self._receipts is None:
            return result
        if not decided:
            if policy.approval != "ask" or grant is None:
                return result  # nobody decided (approval is off): nothing to prove
            # Let through by a grant: the receipt names it, as a tool call's does.
            return with_receipt(result, await self._receipts.for_grant(
                ctx.server.name, ctx.conversation.id(), "", asked, grant.id, grant.given_by, ctx.requester,
                kind="sampling", content=result_json(result, "content")))
        # One receipt for the request and the answer that went back: the last card's, naming everyone who decided.
        last, outcome = decided[-1]
        meta = await self._receipts.for_decision(last, outcome, content=result_json(result, "content"),
                                                 earlier=[o for _, o in decided[:-1]])
        return with_receipt(result, meta)

    def _approval(self, ctx: RequestContext, params: CreateMessageRequestParams, max_tokens: int, model: str | None,
                  timeout: float, asked: str) -> Interaction:
        details = [Detail("System prompt", params.system_prompt or "(none)")]
        for n, message in enumerate(params.messages, 1):
            details.append(_message_detail(n, message))
        prefs = params.model_preferences
        if prefs is not None:
            details.append(Detail("Model preferences", json.dumps(prefs.model_dump(exclude_none=True))))
        details.append(Detail("Limits", f"maxTokens {max_tokens} (asked {params.max_tokens}), model "
                                        f"{model or 'default'}, includeContext {params.include_context or 'none'}"))
        if params.tools:
            details.append(Detail("Tools offered to the model", ", ".join(t.name for t in params.tools)))
        fields = [Field("system_prompt", FieldKind.TEXT, "System prompt", default=params.system_prompt or "",
                        has_default=True, multiline=True)]
        last = params.messages[-1] if params.messages else None
        if last is not None and last.role == "user":
            text = "\n".join(block_text(b) for b in _blocks(last))
            fields.append(Field("prompt", FieldKind.TEXT, "Last user message", default=text, has_default=True,
                                multiline=True))
        asked = f"{ctx.server.text()} wants the model to answer {count(len(params.messages), 'message')}."
        return new_interaction(
            ctx, Kind.SAMPLING, asked,
            form=approval_form(fields), timeout=timeout, details=tuple(details), accept_label="Approve",
            decline_label="Deny", quick_accept=True,
            grants=offers(self._config.servers[ctx.server.name].sampling.grants), request=asked)

    def _review(self, ctx: RequestContext, response: LLMResponse | None, timeout: float, asked: str) -> Interaction:
        form = Form()
        if response is None:
            answer = Field("answer", FieldKind.TEXT, "Your answer", required=True, multiline=True)
            message = "No model is configured: write the answer the server should get."
            details: tuple[Detail, ...] = ()
        elif response.tool_calls:
            # Tool calls go back as the model made them (approve or deny); editing them is not offered.
            message = f"The model ({response.model}) wants to call tools; check before this goes back to " \
                      f"{ctx.server.name}."
            details = tuple(Detail(f"Tool call {call.name}", json.dumps(call.arguments, ensure_ascii=False))
                            for call in response.tool_calls)
            if response.text:
                details = (Detail("Answer", response.text), *details)
        else:
            answer = Field("answer", FieldKind.TEXT, "Answer", default=response.text, has_default=True,
                           multiline=True)
            message = f"The model ({response.model}) answered; check it before it goes back to {ctx.server.name}."
            details = (Detail("Answer", response.text),)
        if response is None or not response.tool_calls:
            form = approval_form([answer])
        return new_interaction(
            ctx, Kind.SAMPLING_REVIEW, message, form=form, timeout=timeout, details=details, accept_label="Send",
            decline_label="Deny", quick_accept=response is not None, request=asked)


def _blocks(message: SamplingMessage) -> list[object]:
    return list(message.content) if isinstance(message.content, list) else [message.content]


def _message_detail(n: int, message: SamplingMessage) -> Detail:
    text = "\n".join(block_text(b) for b in _blocks(message))
    return Detail(f"Message {n} ({message.role})", text, full_length=len(text))


def _rejected(status: Status) -> ErrorData:
    reason = {Status.EXPIRED: "nobody answered in time", Status.FAILED: "the request could not be shown"}.get(
        status, "a person said no")
    return ErrorData(code=USER_REJECTED, message=f"User rejected sampling request ({reason})")


__all__ = ["Sampler", "SamplingAnswer"]
