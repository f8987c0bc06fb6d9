"""`LLMProvider` over the OpenAI Chat Completions API.

Chat Completions (not the newer Responses API) on purpose: it is the dialect every
OpenAI-compatible server speaks (Ollama, vLLM, LM Studio, LiteLLM, llama.cpp), so
one provider covers the hosted API and local models via `base_url`.

The `openai` SDK is an optional extra: it is imported when a provider is built,
never when this module is imported.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from bridge.llm.errors import (
    LLMError,
    body_detail,
    connection_error,
    missing_extra,
    redact,
    scrub,
    status_error,
)
from bridge.llm.types import LLMMessage, LLMRequest, LLMResponse, StopReason, ToolCall, Usage

if TYPE_CHECKING:
    import openai
    from openai.types.chat import (
        ChatCompletion,
        ChatCompletionAssistantMessageParam,
        ChatCompletionFunctionToolParam,
        ChatCompletionMessageFunctionToolCallParam,
        ChatCompletionMessageParam,
    )

log = logging.getLogger(__name__)

MaxTokensField = Literal["max_tokens", "max_completion_tokens"]

_STOP_REASONS: dict[str, StopReason] = {
    "stop": "endTurn",
    "length": "maxTokens",
    "tool_calls": "toolUse",
    "function_call": "toolUse",
}


class OpenAIProvider:
    """Chat Completions through `openai.AsyncOpenAI`.

    Args:
        model: The default model; a request's `model` overrides it.
        api_key: None lets the SDK read `OPENAI_API_KEY`. Local servers that need no
            key still need some value here (any string).
        base_url: e.g. `http://localhost:11434/v1` for Ollama; None for api.openai.com.
        timeout: Seconds per HTTP attempt.
        max_retries: SDK retries on 408/409/429/5xx and connection errors, with backoff
            that honours `retry-after`.
        max_tokens_field: The request field for the output limit. OpenAI deprecated
            `max_tokens` (its reasoning models reject it) while many compatible servers
            only know `max_tokens`, so the default picks `max_completion_tokens` for
            api.openai.com and `max_tokens` when `base_url` is set.

    Raises:
        LLMError: the `openai` extra is missing, or no API key could be found.
    """

    name = "openai"
    supports_tools = True

    def __init__(
        self,
        model: str | None,
        api_key: str | None,
        base_url: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        *,
        max_tokens_field: MaxTokensField | None = None,
    ) -> None:
        try:
            import openai
        except ImportError:
            raise missing_extra("openai") from None
        self.default_model = model
        self._timeout = timeout
        self._max_tokens_field: MaxTokensField = max_tokens_field or (
            "max_tokens" if base_url else "max_completion_tokens"
        )
        try:
            self._client = openai.AsyncOpenAI(
                api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries
            )
        except openai.OpenAIError as exc:
            raise LLMError(f"openai: {redact(str(exc), [api_key])}") from None
        self._secrets = (api_key, self._client.api_key)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Run one chat completion.

        Raises:
            LLMError: the endpoint failed or answered with something unusable.
        """
        import openai

        model = request.model or self.default_model
        if not model:
            raise LLMError("openai: no model configured and the request names none")
        log.debug("openai: %s, %d messages, %d tools", model, len(request.messages), len(request.tools))
        tools = [_tool_param(t.name, t.description, t.input_schema) for t in request.tools]
        use_legacy_limit = self._max_tokens_field == "max_tokens"
        try:
            completion = await self._client.chat.completions.create(
                model=model,
                messages=to_openai_messages(request.system, request.messages),
                temperature=request.temperature if request.temperature is not None else openai.omit,
                stop=list(request.stop) if request.stop else openai.omit,
                # tool_choice without tools is a 400 on OpenAI and on most compatible servers.
                tools=tools if tools else openai.omit,
                tool_choice=request.tool_choice if tools and request.tool_choice else openai.omit,
                max_tokens=request.max_tokens if use_legacy_limit else openai.omit,
                max_completion_tokens=openai.omit if use_legacy_limit else request.max_tokens,
            )
        except openai.APIError as exc:
            raise self._translate(exc) from exc
        return from_openai_completion(completion)

    async def aclose(self) -> None:
        await self._client.close()

    def _translate(self, exc: openai.APIError) -> LLMError:
        import openai

        if isinstance(exc, openai.APIStatusError):
            error = status_error("openai", exc.status_code, body_detail(exc.body, exc.message), self._secrets)
        elif isinstance(exc, openai.APIConnectionError):
            timed_out = isinstance(exc, openai.APITimeoutError)
            error = connection_error("openai", timed_out=timed_out, timeout=self._timeout)
        else:  # e.g. APIResponseValidationError: the endpoint answered with a malformed body
            error = LLMError(f"openai: unusable response: {redact(exc.message, self._secrets)}")
        scrub(exc, self._secrets)
        return error


def _tool_param(name: str, description: str, schema: dict[str, Any]) -> ChatCompletionFunctionToolParam:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": schema}}


def to_openai_messages(system: str | None, messages: Sequence[LLMMessage]) -> list[ChatCompletionMessageParam]:
    """Build the Chat Completions `messages` list.

    Tool results become one `role: "tool"` message each, placed before any text of
    the same turn, because the API wants them right after the assistant's tool calls.
    """
    out: list[ChatCompletionMessageParam] = []
    if system:
        out.append({"role": "system", "content": system})
    for message in messages:
        if message.role == "assistant":
            out.append(_assistant_message(message))
            continue
        for result in message.tool_results:
            # Chat Completions has no error flag on tool messages; say it in the text.
            content = f"Error: {result.content}" if result.is_error else result.content
            out.append({"role": "tool", "tool_call_id": result.call_id, "content": content})
        if message.text or not message.tool_results:
            out.append({"role": "user", "content": message.text})
    return out


def _assistant_message(message: LLMMessage) -> ChatCompletionAssistantMessageParam:
    param: ChatCompletionAssistantMessageParam = {"role": "assistant", "content": message.text or None}
    if message.tool_calls:
        calls: list[ChatCompletionMessageFunctionToolCallParam] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
            for c in message.tool_calls
        ]
        param["tool_calls"] = calls
    return param


def from_openai_completion(completion: ChatCompletion) -> LLMResponse:
    """Turn a `ChatCompletion` into an `LLMResponse`.

    Raises:
        LLMError: no choices, a non-function tool call, or tool arguments that are not a JSON object.
    """
    if not completion.choices:
        raise LLMError("openai: the response has no choices")
    choice = completion.choices[0]
    calls: list[ToolCall] = []
    for call in choice.message.tool_calls or ():
        if call.type != "function":
            raise LLMError(f"openai: unsupported tool call type {call.type!r}")
        calls.append(ToolCall(call.id, call.function.name, _arguments(call.function.name, call.function.arguments)))
    # Some compatible servers report "stop" alongside tool calls; the calls are what matters.
    finish = choice.finish_reason or "unknown"  # compatible servers may omit it despite the schema
    stop_reason = "toolUse" if calls else _STOP_REASONS.get(finish, finish)
    return LLMResponse(
        text=choice.message.content or choice.message.refusal or "",
        model=completion.model,
        stop_reason=stop_reason,
        tool_calls=tuple(calls),
        usage=Usage(completion.usage.prompt_tokens, completion.usage.completion_tokens) if completion.usage else None,
    )


def _arguments(tool: str, raw: str) -> dict[str, Any]:
    if not raw.strip():
        return {}  # some compatible servers send "" for a call without arguments
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise LLMError(f"openai: the model sent invalid JSON arguments for tool {tool!r}: {exc}") from None
    if not isinstance(value, dict):
        raise LLMError(f"openai: the model sent arguments for tool {tool!r} that are not a JSON object")
    return value
