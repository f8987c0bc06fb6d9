"""OpenAIProvider against a local Chat Completions server, through the real `openai` SDK."""

from __future__ import annotations

import json
import logging
import socket
import sys
import traceback
from collections.abc import AsyncIterator

import pytest

from bridge.llm import LLMError, LLMMessage, LLMRequest, OpenAIProvider, ToolCall, ToolResult, ToolSpec
from tests.llm.fake_llm_server import (
    OPENAI_PATH,
    RETRY_NOW,
    FakeLLMServer,
    Reply,
    openai_completion,
    openai_error,
    openai_tool_call,
)

pytestmark = pytest.mark.anyio

KEY = "sk-test-0123456789abcdef"
WEATHER = ToolSpec(
    "get_weather",
    "Current weather for a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


@pytest.fixture
async def provider(fake: FakeLLMServer) -> AsyncIterator[OpenAIProvider]:
    p = OpenAIProvider("gpt-test", KEY, base_url=f"{fake.url}/v1", timeout=5.0, max_retries=1)
    yield p
    await p.aclose()


async def test_plain_answer_sends_the_request_and_maps_the_reply(fake: FakeLLMServer, provider: OpenAIProvider) -> None:
    fake.reply(Reply(body=openai_completion("Hi there")))
    request = LLMRequest(
        messages=[LLMMessage("user", "Say hi")], system="Be brief.", max_tokens=50, temperature=0.2, stop=["END"]
    )

    response = await provider.complete(request)

    assert response.text == "Hi there"
    assert response.model == "gpt-test-2026-01-01"
    assert response.stop_reason == "endTurn"
    assert response.tool_calls == ()
    assert response.usage is not None and (response.usage.input_tokens, response.usage.total) == (5, 7)
    [sent] = fake.requests
    assert sent.path == OPENAI_PATH
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.body["model"] == "gpt-test"
    assert sent.body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Say hi"},
    ]
    # A custom base_url means "OpenAI-compatible server": the classic field name.
    assert sent.body["max_tokens"] == 50
    assert "max_completion_tokens" not in sent.body
    assert sent.body["temperature"] == 0.2
    assert sent.body["stop"] == ["END"]
    assert "tools" not in sent.body and "tool_choice" not in sent.body


async def test_request_model_overrides_the_default_and_the_limit_field_is_configurable(
    fake: FakeLLMServer,
) -> None:
    fake.reply(Reply(body=openai_completion(finish_reason="length")))
    p = OpenAIProvider("gpt-test", KEY, base_url=f"{fake.url}/v1", max_tokens_field="max_completion_tokens")
    try:
        response = await p.complete(LLMRequest([LLMMessage("user", "hi")], max_tokens=7, model="gpt-other"))
    finally:
        await p.aclose()

    assert response.stop_reason == "maxTokens"
    body = fake.requests[0].body
    assert body["model"] == "gpt-other"
    assert body["max_completion_tokens"] == 7
    assert "max_tokens" not in body and "temperature" not in body


async def test_tool_calls_answer_is_decoded(fake: FakeLLMServer, provider: OpenAIProvider) -> None:
    fake.reply(
        Reply(
            body=openai_completion(
                None,
                finish_reason="tool_calls",
                tool_calls=[
                    openai_tool_call("call_1", "get_weather", '{"city": "Paris"}'),
                    openai_tool_call("call_2", "get_weather", ""),
                ],
            )
        )
    )

    response = await provider.complete(
        LLMRequest([LLMMessage("user", "Weather?")], tools=[WEATHER], tool_choice="required")
    )

    assert response.stop_reason == "toolUse"
    assert response.text == ""
    assert response.tool_calls == (
        ToolCall("call_1", "get_weather", {"city": "Paris"}),
        ToolCall("call_2", "get_weather", {}),
    )
    body = fake.requests[0].body
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Current weather for a city",
                "parameters": WEATHER.input_schema,
            },
        }
    ]
    assert body["tool_choice"] == "required"


async def test_tool_calls_win_over_a_stop_finish_reason(fake: FakeLLMServer, provider: OpenAIProvider) -> None:
    # Some compatible servers (older Ollama) say "stop" even when the model called a tool.
    fake.reply(Reply(body=openai_completion("", tool_calls=[openai_tool_call("c", "get_weather", "{}")])))

    response = await provider.complete(LLMRequest([LLMMessage("user", "x")], tools=[WEATHER]))

    assert response.stop_reason == "toolUse"


async def test_tool_history_becomes_assistant_tool_calls_and_tool_messages(
    fake: FakeLLMServer, provider: OpenAIProvider
) -> None:
    fake.reply(Reply(body=openai_completion("It is sunny in Paris, rainy in Oslo.")))
    history = [
        LLMMessage("user", "Weather in Paris and Oslo?"),
        LLMMessage(
            "assistant",
            "Checking.",
            tool_calls=(
                ToolCall("call_1", "get_weather", {"city": "Paris"}),
                ToolCall("call_2", "get_weather", {"city": "Oslo"}),
            ),
        ),
        LLMMessage(
            "user",
            tool_results=(ToolResult("call_1", "sunny"), ToolResult("call_2", "service down", is_error=True)),
        ),
    ]

    response = await provider.complete(LLMRequest(history, tools=[WEATHER], tool_choice="auto"))

    assert response.text == "It is sunny in Paris, rainy in Oslo."
    messages = fake.requests[0].body["messages"]
    assert messages[1] == {
        "role": "assistant",
        "content": "Checking.",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
            {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}},
        ],
    }
    assert messages[2:] == [
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_2", "content": "Error: service down"},
    ]


async def test_invalid_tool_arguments_are_an_llm_error(fake: FakeLLMServer, provider: OpenAIProvider) -> None:
    fake.reply(
        Reply(
            body=openai_completion(
                None,
                finish_reason="tool_calls",
                tool_calls=[openai_tool_call("call_1", "get_weather", '{"city": "Par')],
            )
        )
    )

    with pytest.raises(LLMError, match="invalid JSON arguments for tool 'get_weather'") as info:
        await provider.complete(LLMRequest([LLMMessage("user", "x")], tools=[WEATHER]))
    assert not info.value.retryable


async def test_rate_limit_is_retried_by_the_sdk(fake: FakeLLMServer, provider: OpenAIProvider) -> None:
    fake.reply(
        Reply(429, openai_error("Rate limit reached", "rate_limit_error"), RETRY_NOW),
        Reply(body=openai_completion("after retry")),
    )

    response = await provider.complete(LLMRequest([LLMMessage("user", "hi")]))

    assert response.text == "after retry"
    assert len(fake.requests) == 2
    assert fake.requests[0].body == fake.requests[1].body


async def test_rate_limit_after_the_retries_is_retryable(fake: FakeLLMServer, provider: OpenAIProvider) -> None:
    fake.reply(*[Reply(429, openai_error("Rate limit reached", "rate_limit_error"), RETRY_NOW)] * 2)

    with pytest.raises(LLMError) as info:
        await provider.complete(LLMRequest([LLMMessage("user", "hi")]))

    assert info.value.status == 429
    assert info.value.retryable
    assert "rate-limited" in str(info.value)
    assert "Rate limit reached" in str(info.value)
    assert len(fake.requests) == 2  # the first try and max_retries=1


async def test_server_error_is_a_retryable_llm_error(fake: FakeLLMServer, provider: OpenAIProvider) -> None:
    fake.reply(*[Reply(500, openai_error("The server had an error", "server_error"), RETRY_NOW)] * 2)

    with pytest.raises(LLMError, match=r"openai: server error \(HTTP 500\): The server had an error") as info:
        await provider.complete(LLMRequest([LLMMessage("user", "hi")]))

    assert info.value.status == 500
    assert info.value.retryable
    assert type(info.value.__cause__).__name__ == "InternalServerError"


async def test_bad_key_is_not_retryable_and_never_echoes_the_key(
    fake: FakeLLMServer, provider: OpenAIProvider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    # A careless compatible server echoes the whole key back.
    fake.reply(Reply(401, openai_error(f"Incorrect API key provided: {KEY}.", "invalid_request_error")))

    with pytest.raises(LLMError, match="authentication failed") as info:
        await provider.complete(LLMRequest([LLMMessage("user", "hi")]))

    assert info.value.status == 401
    assert not info.value.retryable
    assert len(fake.requests) == 1
    assert "Incorrect API key provided: ***." in str(info.value)
    printed = "".join(traceback.format_exception(info.value))
    assert "openai.AuthenticationError" in printed  # the SDK exception stays chained as the cause
    assert KEY not in printed
    assert "openai: gpt-test, 1 messages" in caplog.text
    assert KEY not in caplog.text


async def test_timeout_is_a_retryable_llm_error(fake: FakeLLMServer) -> None:
    fake.reply(Reply(body=openai_completion(), hang=True))
    p = OpenAIProvider("gpt-test", KEY, base_url=f"{fake.url}/v1", timeout=0.2, max_retries=0)
    try:
        with pytest.raises(LLMError, match=r"no answer within 0.2s") as info:
            await p.complete(LLMRequest([LLMMessage("user", "hi")]))
    finally:
        await p.aclose()
    assert info.value.retryable
    assert info.value.status is None


async def test_unreachable_endpoint_is_a_retryable_llm_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: nothing listens there
    p = OpenAIProvider("gpt-test", KEY, base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    try:
        with pytest.raises(LLMError, match="could not connect") as info:
            await p.complete(LLMRequest([LLMMessage("user", "hi")]))
    finally:
        await p.aclose()
    assert info.value.retryable


async def test_no_model_anywhere_fails_before_any_request(fake: FakeLLMServer) -> None:
    p = OpenAIProvider(None, KEY, base_url=f"{fake.url}/v1")
    try:
        with pytest.raises(LLMError, match="no model configured"):
            await p.complete(LLMRequest([LLMMessage("user", "hi")]))
    finally:
        await p.aclose()
    assert fake.requests == []


def test_missing_key_is_a_clear_llm_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY"):
        monkeypatch.delenv(name, raising=False)

    with pytest.raises(LLMError, match="openai: Missing credentials"):
        OpenAIProvider("gpt-test", None, base_url="http://127.0.0.1:9/v1")


def test_missing_extra_names_the_pip_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)  # makes `import openai` raise ImportError

    with pytest.raises(LLMError) as info:
        OpenAIProvider("gpt-test", KEY)
    assert str(info.value) == ("the openai provider needs the llm extra: install the bridge with it "
                               "(pip install '.[llm]' in its clone; see the README's Installing)")


def test_tool_arguments_round_trip_as_json_text() -> None:
    # The history sent back must be the JSON text the model produced, re-encoded faithfully.
    from bridge.llm.openai_provider import to_openai_messages

    [message] = to_openai_messages(None, [LLMMessage("assistant", tool_calls=(ToolCall("c", "t", {"a": [1, "é"]}),))])
    assert message["role"] == "assistant"
    assert "content" in message and message["content"] is None
    [call] = list(message.get("tool_calls", []))
    assert call["type"] == "function"
    assert json.loads(call["function"]["arguments"]) == {"a": [1, "é"]}
