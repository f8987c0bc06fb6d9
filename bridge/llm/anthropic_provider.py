"""`LLMProvider` over the Anthropic Messages API.

The `anthropic` SDK is an optional extra: it is imported when a provider is built,
never when this module is imported.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from bridge.llm.errors import (
    LLMError,
    body_detail,
    connection_error,
    missing_extra,
    redact,
    scrub,
    status_error,
)
from bridge.llm.types import LLMMessage, LLMRequest, LLMResponse, StopReason, ToolCall, ToolChoiceMode, Usage

if TYPE_CHECKING:
    import anthropic
    from anthropic.types import ContentBlockParam, Message, MessageParam, ToolChoiceParam, ToolParam

log = logging.getLogger(__name__)

_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "endTurn",
    "max_tokens": "maxTokens",
    "stop_sequence": "stopSequence",
    "tool_use": "toolUse",
}

_TOOL_CHOICE: dict[ToolChoiceMode, ToolChoiceParam] = {
    "auto": {"type": "auto"},
    "required": {"type": "any"},
    "none": {"type": "none"},
}


class AnthropicProvider:
    """Messages API through `anthropic.AsyncAnthropic`.

    `LLMRequest.temperature` is not sent: the SDK (1.0+) dropped the parameter and
    current Claude models answer 400 to it. MCP makes it advisory anyway.

    Args:
        model: The default model; a request's `model` overrides it.
        api_key: None lets the SDK find credentials (`ANTHROPIC_API_KEY`, its profiles).
        base_url: None for api.anthropic.com; set it for a gateway or a test server.
        timeout: Seconds per HTTP attempt.
        max_retries: SDK retries on 408/409/429/5xx and connection errors, with backoff
            that honours `retry-after`.

    Raises:
        LLMError: the `anthropic` extra is missing.
    """

    name = "anthropic"
    supports_tools = True

    def __init__(
        self,
        model: str | None,
        api_key: str | None,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
    ) -> None:
        try:
            import anthropic
        except ImportError:
            raise missing_extra("anthropic") from None
        self.default_model = model
        self._timeout = timeout
        try:
            self._client = anthropic.AsyncAnthropic(
                api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries
            )
        except anthropic.AnthropicError as exc:
            raise LLMError(f"anthropic: {redact(str(exc), [api_key])}") from None
        self._secrets = (api_key, self._client.api_key, self._client.auth_token)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Run one Messages API call.

        Raises:
            LLMError: the endpoint failed or answered with something unusable.
        """
        import anthropic

        model = request.model or self.default_model
        if not model:
            raise LLMError("anthropic: no model configured and the request names none")
        log.debug("anthropic: %s, %d messages, %d tools", model, len(request.messages), len(request.tools))
        tools: list[ToolParam] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in request.tools
        ]
        try:
            message = await self._client.messages.create(
                model=model,
                max_tokens=request.max_tokens,
                messages=to_anthropic_messages(request.messages),
                system=request.system if request.system else anthropic.omit,
                stop_sequences=list(request.stop) if request.stop else anthropic.omit,
                tools=tools if tools else anthropic.omit,
                tool_choice=_TOOL_CHOICE[request.tool_choice] if tools and request.tool_choice else anthropic.omit,
            )
        except anthropic.APIError as exc:
            raise self._translate(exc) from exc
        except anthropic.AnthropicError as exc:  # e.g. no credentials could be resolved
            scrub(exc, self._secrets)
            raise LLMError(f"anthropic: {redact(str(exc), self._secrets)}") from exc
        return from_anthropic_message(message)

    async def aclose(self) -> None:
        await self._client.close()

    def _translate(self, exc: anthropic.APIError) -> LLMError:
        import anthropic

        if isinstance(exc, anthropic.APIStatusError):
            detail = exc.api_message or body_detail(exc.body, exc.message)
            error = status_error("anthropic", exc.status_code, detail, self._secrets)
        elif isinstance(exc, anthropic.APIConnectionError):
            timed_out = isinstance(exc, anthropic.APITimeoutError)
            error = connection_error("anthropic", timed_out=timed_out, timeout=self._timeout)
        else:  # e.g. APIResponseValidationError: the endpoint answered with a malformed body
            error = LLMError(f"anthropic: unusable response: {redact(exc.message, self._secrets)}")
        scrub(exc, self._secrets)
        return error


def to_anthropic_messages(messages: Sequence[LLMMessage]) -> list[MessageParam]:
    """Build the Messages API `messages` list.

    Tool results go first in their user turn, as the API requires. Empty text blocks
    are left out because the API rejects them.
    """
    out: list[MessageParam] = []
    for message in messages:
        blocks: list[ContentBlockParam] = []
        for result in message.tool_results:
            blocks.append(
                {
                    "type": "tool_result",
                    "tool_use_id": result.call_id,
                    "content": result.content,
                    "is_error": result.is_error,
                }
            )
        if message.text:
            blocks.append({"type": "text", "text": message.text})
        for call in message.tool_calls:
            blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments})
        if message.role == "assistant":
            out.append({"role": "assistant", "content": blocks or message.text})
        else:
            out.append({"role": "user", "content": blocks or message.text})
    return out


def from_anthropic_message(message: Message) -> LLMResponse:
    """Turn a `Message` into an `LLMResponse`; thinking and server-tool blocks are dropped."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in message.content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            calls.append(ToolCall(block.id, block.name, dict(block.input)))
    reason = message.stop_reason or "unknown"
    return LLMResponse(
        text="".join(texts),
        model=message.model,
        stop_reason=_STOP_REASONS.get(reason, reason),
        tool_calls=tuple(calls),
        usage=_usage(message),
    )


def _usage(message: Message) -> Usage:
    """Input counts cached prompt tokens too: they are tokens the model read (and the account paid for)."""
    u = message.usage
    cached = (u.cache_creation_input_tokens or 0) + (u.cache_read_input_tokens or 0)
    return Usage(u.input_tokens + cached, u.output_tokens)
