"""AnthropicProvider against a local Messages API server, through the real `anthropic` SDK."""

from __future__ import annotations

import logging
import sys
import traceback
from collections.abc import AsyncIterator

import pytest

from bridge.llm import AnthropicProvider, LLMError, LLMMessage, LLMRequest, ToolCall, ToolResult, ToolSpec
from tests.llm.fake_llm_server import (
    ANTHROPIC_PATH,
    RETRY_NOW,
    FakeLLMServer,
    Reply,
    anthropic_error,
    anthropic_message,
)

pytestmark = pytest.mark.anyio

KEY = "sk-ant-test-0123456789abcdef"
WEATHER = ToolSpec(
    "get_weather",
    "Current weather for a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


@pytest.fixture
async def provider(fake: FakeLLMServer) -> AsyncIterator[AnthropicProvider]:
    p = AnthropicProvider("claude-test", KEY, base_url=fake.url, timeout=5.0, max_retries=1)
    yield p
    await p.aclose()


async def test_text_answer_sends_the_request_and_maps_the_reply(
    fake: FakeLLMServer, provider: AnthropicProvider
) -> None:
    fake.reply(Reply(body=anthropic_message([{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}])))
    request = LLMRequest(
        [LLMMessage("user", "Say hi")], system="Be brief.", max_tokens=50, temperature=0.3, stop=["END"]
    )

    response = await provider.complete(request)

    assert response.text == "Hi there"
    assert response.model == "claude-test-2026-01-01"
    assert response.stop_reason == "endTurn"
    assert response.tool_calls == ()
    assert response.usage is not None and (response.usage.input_tokens, response.usage.output_tokens) == (5, 2)
    [sent] = fake.requests
    assert sent.path == ANTHROPIC_PATH
    # SDK 2.x sends the key as a bearer token (1.x used `x-api-key`).
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert "anthropic-version" in sent.headers
    assert sent.body["model"] == "claude-test"
    assert sent.body["max_tokens"] == 50
    assert sent.body["system"] == "Be brief."
    assert sent.body["stop_sequences"] == ["END"]
    assert sent.body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Say hi"}]}]
    # Current Claude models reject temperature; MCP makes it advisory, so it is dropped.
    assert "temperature" not in sent.body
    assert "tools" not in sent.body and "tool_choice" not in sent.body


@pytest.mark.parametrize(
    ("wire", "mapped"),
    [("max_tokens", "maxTokens"), ("stop_sequence", "stopSequence"), ("refusal", "refusal")],
)
async def test_stop_reasons_are_mapped_or_passed_through(
    fake: FakeLLMServer, provider: AnthropicProvider, wire: str, mapped: str
) -> None:
    fake.reply(Reply(body=anthropic_message([{"type": "text", "text": "x"}], stop_reason=wire)))

    response = await provider.complete(LLMRequest([LLMMessage("user", "hi")]))

    assert response.stop_reason == mapped


async def test_tool_use_answer_is_mapped(fake: FakeLLMServer, provider: AnthropicProvider) -> None:
    fake.reply(
        Reply(
            body=anthropic_message(
                [
                    {"type": "thinking", "thinking": "need weather", "signature": "sig"},
                    {"type": "text", "text": "Let me check."},
                    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
                ],
                stop_reason="tool_use",
            )
        )
    )

    response = await provider.complete(
        LLMRequest([LLMMessage("user", "Weather?")], tools=[WEATHER], tool_choice="required")
    )

    assert response.stop_reason == "toolUse"
    assert response.text == "Let me check."
    assert response.tool_calls == (ToolCall("toolu_1", "get_weather", {"city": "Paris"}),)
    body = fake.requests[0].body
    assert body["tools"] == [
        {"name": "get_weather", "description": "Current weather for a city", "input_schema": WEATHER.input_schema}
    ]
    assert body["tool_choice"] == {"type": "any"}


async def test_tool_history_becomes_tool_use_and_tool_result_blocks(
    fake: FakeLLMServer, provider: AnthropicProvider
) -> None:
    fake.reply(Reply(body=anthropic_message([{"type": "text", "text": "Sunny."}])))
    history = [
        LLMMessage("user", "Weather in Paris?"),
        LLMMessage("assistant", "Checking.", tool_calls=(ToolCall("toolu_1", "get_weather", {"city": "Paris"}),)),
        LLMMessage("user", "Be quick.", tool_results=(ToolResult("toolu_1", "sunny", is_error=False),)),
        LLMMessage("assistant", tool_calls=(ToolCall("toolu_2", "get_weather", {"city": "Oslo"}),)),
        LLMMessage("user", tool_results=(ToolResult("toolu_2", "service down", is_error=True),)),
    ]

    await provider.complete(LLMRequest(history, tools=[WEATHER], tool_choice="none"))

    body = fake.requests[0].body
    assert body["tool_choice"] == {"type": "none"}
    assert body["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny", "is_error": False},
                {"type": "text", "text": "Be quick."},
            ],
        },
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"city": "Oslo"}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "service down", "is_error": True}],
        },
    ]


async def test_rate_limit_is_retried_by_the_sdk(fake: FakeLLMServer, provider: AnthropicProvider) -> None:
    fake.reply(
        Reply(429, anthropic_error("Number of requests exceeded", "rate_limit_error"), RETRY_NOW),
        Reply(body=anthropic_message([{"type": "text", "text": "after retry"}])),
    )

    response = await provider.complete(LLMRequest([LLMMessage("user", "hi")]))

    assert response.text == "after retry"
    assert len(fake.requests) == 2


async def test_rate_limit_after_the_retries_is_retryable(fake: FakeLLMServer, provider: AnthropicProvider) -> None:
    fake.reply(*[Reply(429, anthropic_error("Number of requests exceeded", "rate_limit_error"), RETRY_NOW)] * 2)

    with pytest.raises(LLMError, match=r"anthropic: rate-limited \(HTTP 429\): Number of requests exceeded") as info:
        await provider.complete(LLMRequest([LLMMessage("user", "hi")]))

    assert info.value.status == 429
    assert info.value.retryable
    assert len(fake.requests) == 2


async def test_overloaded_is_a_retryable_llm_error(fake: FakeLLMServer, provider: AnthropicProvider) -> None:
    fake.reply(*[Reply(529, anthropic_error("Overloaded", "overloaded_error"), RETRY_NOW)] * 2)

    with pytest.raises(LLMError, match=r"server error \(HTTP 529\): Overloaded") as info:
        await provider.complete(LLMRequest([LLMMessage("user", "hi")]))

    assert info.value.status == 529
    assert info.value.retryable


async def test_bad_request_is_not_retryable(fake: FakeLLMServer, provider: AnthropicProvider) -> None:
    fake.reply(Reply(400, anthropic_error("max_tokens: must be positive", "invalid_request_error")))

    with pytest.raises(LLMError, match=r"request rejected \(HTTP 400\): max_tokens: must be positive") as info:
        await provider.complete(LLMRequest([LLMMessage("user", "hi")]))

    assert info.value.status == 400
    assert not info.value.retryable
    assert len(fake.requests) == 1


async def test_bad_key_never_echoes_the_key(
    fake: FakeLLMServer, provider: AnthropicProvider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    fake.reply(Reply(401, anthropic_error(f"invalid x-api-key {KEY}", "authentication_error")))

    with pytest.raises(LLMError, match=r"authentication failed .*: invalid x-api-key \*\*\*") as info:
        await provider.complete(LLMRequest([LLMMessage("user", "hi")]))

    assert info.value.status == 401
    assert not info.value.retryable
    printed = "".join(traceback.format_exception(info.value))
    assert "anthropic.AuthenticationError" in printed
    assert KEY not in printed
    assert "anthropic: claude-test, 1 messages" in caplog.text
    assert KEY not in caplog.text


async def test_timeout_is_a_retryable_llm_error(fake: FakeLLMServer) -> None:
    fake.reply(Reply(body=anthropic_message([]), hang=True))
    p = AnthropicProvider("claude-test", KEY, base_url=fake.url, timeout=0.2, max_retries=0)
    try:
        with pytest.raises(LLMError, match=r"no answer within 0.2s") as info:
            await p.complete(LLMRequest([LLMMessage("user", "hi")]))
    finally:
        await p.aclose()
    assert info.value.retryable


def test_missing_extra_names_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)

    with pytest.raises(LLMError, match=r"the anthropic provider needs the llm extra: .*pip install '\.\[llm\]'"):
        AnthropicProvider("claude-test", KEY)
