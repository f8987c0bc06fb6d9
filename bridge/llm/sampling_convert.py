"""Pure conversions between MCP `sampling/createMessage` and the LLM layer's types.

No I/O and no SDK: the sampling handler calls `to_llm_request`, shows the request
to the approver, runs a provider, and answers with `to_create_message_result`.

Only text reaches the model. Images and audio become a short placeholder such as
`[image/png, 1234 bytes]` so the model (and the approver reading the prompt) knows
something was there; forwarding media would need per-provider multimodal support.
The description is `bridge.text.content.block_text`, the same one the approval card shows.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from mcp.types import (
    CreateMessageRequestParams,
    CreateMessageResult,
    CreateMessageResultWithTools,
    SamplingMessage,
    SamplingMessageContentBlock,
    TextContent,
    ToolResultContent,
    ToolUseContent,
)

from bridge.errors import BridgeError
from bridge.llm.types import LLMMessage, LLMRequest, LLMResponse, ToolCall, ToolResult, ToolSpec
from bridge.text.content import block_text


class InvalidSamplingRequest(BridgeError):
    """The request breaks the spec's tool-use rules; answer it with -32602 (INVALID_PARAMS)."""


def to_llm_request(params: CreateMessageRequestParams, *, model: str | None, max_tokens_cap: int | None) -> LLMRequest:
    """Build the provider request for a sampling request.

    Args:
        params: The server's request.
        model: The model the host chose (see `pick_model`); None means the provider default.
        max_tokens_cap: The host's ceiling; the spec lets the client lower `maxTokens`.

    Raises:
        InvalidSamplingRequest: a `tool_use` without its `tool_result`, or results mixed with other content.
    """
    _check_tool_pairing(params.messages)
    max_tokens = params.max_tokens if max_tokens_cap is None else min(params.max_tokens, max_tokens_cap)
    tools = tuple(ToolSpec(t.name, t.description or "", t.input_schema) for t in params.tools or ())
    return LLMRequest(
        messages=tuple(_to_llm_message(m) for m in params.messages),
        system=params.system_prompt or None,
        max_tokens=max_tokens,
        temperature=params.temperature,
        stop=tuple(params.stop_sequences or ()),
        tools=tools,
        tool_choice=params.tool_choice.mode if params.tool_choice else None,
        model=model,
    )


def to_create_message_result(resp: LLMResponse) -> CreateMessageResult | CreateMessageResultWithTools:
    """Build the sampling result; the tools variant only when the model called tools.

    A plain `CreateMessageResult` (one text block) is valid whether or not the request
    had tools, and it is the only shape servers older than 2025-11-25 understand.
    """
    if not resp.tool_calls:
        return CreateMessageResult(
            role="assistant", content=TextContent(text=resp.text), model=resp.model, stop_reason=resp.stop_reason
        )
    blocks: list[SamplingMessageContentBlock] = [TextContent(text=resp.text)] if resp.text else []
    blocks.extend(ToolUseContent(id=c.id, name=c.name, input=c.arguments) for c in resp.tool_calls)
    return CreateMessageResultWithTools(role="assistant", content=blocks, model=resp.model, stop_reason="toolUse")


def model_hints(params: CreateMessageRequestParams) -> list[str]:
    """The server's model-name hints, in its order of preference."""
    prefs = params.model_preferences
    return [h.name for h in (prefs.hints or ()) if h.name] if prefs else []


def pick_model(hints: Sequence[str], allowed: Sequence[str], default: str | None) -> str | None:
    """Choose a model from the server's hints.

    Hints are case-insensitive substrings tried in order ("sonnet" matches
    "claude-sonnet-4-5"); for each hint the first matching allowed model wins. A
    server may only pick among `allowed`: with no allowed list, or no match, the
    host's `default` is used.
    """
    for hint in hints:
        needle = hint.casefold()
        for name in allowed:
            if needle and needle in name.casefold():
                return name
    return default


def _to_llm_message(message: SamplingMessage) -> LLMMessage:
    texts: list[str] = []
    calls: list[ToolCall] = []
    results: list[ToolResult] = []
    for block in message.content_as_list:
        if isinstance(block, ToolUseContent):
            calls.append(ToolCall(block.id, block.name, dict(block.input)))
        elif isinstance(block, ToolResultContent):
            results.append(ToolResult(block.tool_use_id, _tool_result_text(block), bool(block.is_error)))
        else:
            texts.append(block_text(block))
    return LLMMessage(message.role, "\n".join(texts), tuple(calls), tuple(results))


def _tool_result_text(block: ToolResultContent) -> str:
    if block.content:
        return "\n".join(block_text(b) for b in block.content)
    if block.structured_content is not None:
        return json.dumps(block.structured_content)
    return ""


def _check_tool_pairing(messages: Sequence[SamplingMessage]) -> None:
    """Enforce the spec's rule: every `tool_use` is answered, by a user turn of only `tool_result`s."""
    pending: set[str] = set()
    for index, message in enumerate(messages):
        blocks = message.content_as_list
        result_ids = [b.tool_use_id for b in blocks if isinstance(b, ToolResultContent)]
        if pending:
            if message.role != "user" or len(result_ids) != len(blocks):
                raise InvalidSamplingRequest(
                    f"messages[{index}]: the turn after a tool_use must be a user turn of only tool_result blocks"
                )
            if set(result_ids) != pending:
                missing = ", ".join(sorted(pending - set(result_ids))) or "none"
                raise InvalidSamplingRequest(
                    f"messages[{index}]: tool_result ids do not match the tool_use ids (missing: {missing})"
                )
            pending = set()
        elif result_ids:
            raise InvalidSamplingRequest(f"messages[{index}]: tool_result without a preceding tool_use")
        use_ids = {b.id for b in blocks if isinstance(b, ToolUseContent)}
        if use_ids and message.role != "assistant":
            raise InvalidSamplingRequest(f"messages[{index}]: tool_use blocks belong in an assistant turn")
        pending = use_ids
    if pending:
        raise InvalidSamplingRequest(f"tool_use {', '.join(sorted(pending))} has no tool_result")
