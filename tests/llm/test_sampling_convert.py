"""Pure conversions between MCP sampling and the LLM layer's types."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from mcp.types import (
    AudioContent,
    CreateMessageRequestParams,
    CreateMessageResult,
    CreateMessageResultWithTools,
    EmbeddedResource,
    ImageContent,
    ModelHint,
    ModelPreferences,
    ResourceLink,
    SamplingMessage,
    TextContent,
    TextResourceContents,
    Tool,
    ToolChoice,
    ToolResultContent,
    ToolUseContent,
)

from bridge.llm import (
    InvalidSamplingRequest,
    LLMMessage,
    LLMResponse,
    ToolCall,
    ToolResult,
    ToolSpec,
    model_hints,
    pick_model,
    to_create_message_result,
    to_llm_request,
)

PNG = base64.b64encode(b"\x89PNG" + bytes(1230)).decode()  # 1234 bytes
WAV = base64.b64encode(bytes(11)).decode()  # 11 bytes: base64 with "=" padding
SCHEMA: dict[str, Any] = {"type": "object", "properties": {"city": {"type": "string"}}}


def params(*messages: SamplingMessage, **kwargs: Any) -> CreateMessageRequestParams:
    kwargs.setdefault("max_tokens", 500)
    return CreateMessageRequestParams(messages=list(messages), **kwargs)


def user(*blocks: Any) -> SamplingMessage:
    return SamplingMessage(role="user", content=list(blocks))


def assistant(*blocks: Any) -> SamplingMessage:
    return SamplingMessage(role="assistant", content=list(blocks))


def test_text_messages_system_and_sampling_options_are_carried_over() -> None:
    request = to_llm_request(
        params(
            SamplingMessage(role="user", content=TextContent(text="Hello")),
            assistant(TextContent(text="Hi"), TextContent(text="there")),
            system_prompt="Be kind.",
            temperature=0.5,
            stop_sequences=["STOP"],
        ),
        model="gpt-x",
        max_tokens_cap=None,
    )

    assert request.messages == (LLMMessage("user", "Hello"), LLMMessage("assistant", "Hi\nthere"))
    assert request.system == "Be kind."
    assert request.temperature == 0.5
    assert request.stop == ("STOP",)
    assert request.max_tokens == 500
    assert request.model == "gpt-x"
    assert request.tools == () and request.tool_choice is None


@pytest.mark.parametrize(("cap", "expected"), [(None, 500), (100, 100), (10_000, 500)])
def test_max_tokens_is_capped_by_the_host(cap: int | None, expected: int) -> None:
    request = to_llm_request(params(user(TextContent(text="x"))), model=None, max_tokens_cap=cap)

    assert request.max_tokens == expected


def test_media_becomes_a_placeholder_with_its_type_and_size() -> None:
    request = to_llm_request(
        params(
            user(
                TextContent(text="What is this?"),
                ImageContent(data=PNG, mime_type="image/png"),
                AudioContent(data=WAV, mime_type="audio/wav"),
            )
        ),
        model=None,
        max_tokens_cap=None,
    )

    assert request.messages[0].text == "What is this?\n[image/png, 1234 bytes]\n[audio/wav, 11 bytes]"


def test_tools_and_tool_choice_are_mapped() -> None:
    request = to_llm_request(
        params(
            user(TextContent(text="Weather?")),
            tools=[
                Tool(name="get_weather", description="Weather", input_schema=SCHEMA),
                Tool(name="now", input_schema={"type": "object"}),
            ],
            tool_choice=ToolChoice(mode="required"),
        ),
        model=None,
        max_tokens_cap=None,
    )

    assert request.tools == (
        ToolSpec("get_weather", "Weather", SCHEMA),
        ToolSpec("now", "", {"type": "object"}),
    )
    assert request.tool_choice == "required"


def test_tool_use_and_tool_result_blocks_become_calls_and_results() -> None:
    request = to_llm_request(
        params(
            user(TextContent(text="Weather in Paris and Oslo?")),
            assistant(
                TextContent(text="Checking."),
                ToolUseContent(id="t1", name="get_weather", input={"city": "Paris"}),
                ToolUseContent(id="t2", name="get_weather", input={"city": "Oslo"}),
            ),
            user(
                ToolResultContent(
                    tool_use_id="t1",
                    content=[
                        TextContent(text="sunny"),
                        ResourceLink(name="map", uri="https://example.com/map"),
                        EmbeddedResource(resource=TextResourceContents(uri="file:///f", text="22C")),
                    ],
                ),
                ToolResultContent(tool_use_id="t2", structured_content={"temp": -3}, is_error=True),
            ),
            tools=[Tool(name="get_weather", input_schema=SCHEMA)],
        ),
        model=None,
        max_tokens_cap=None,
    )

    assert request.messages[1] == LLMMessage(
        "assistant",
        "Checking.",
        tool_calls=(ToolCall("t1", "get_weather", {"city": "Paris"}), ToolCall("t2", "get_weather", {"city": "Oslo"})),
    )
    assert request.messages[2] == LLMMessage(
        "user",
        tool_results=(
            ToolResult("t1", "sunny\n[resource https://example.com/map]\n22C"),
            ToolResult("t2", '{"temp": -3}', is_error=True),
        ),
    )


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        pytest.param(
            [assistant(ToolUseContent(id="t1", name="x", input={}))],
            "tool_use t1 has no tool_result",
            id="unanswered tool_use",
        ),
        pytest.param(
            [
                assistant(ToolUseContent(id="t1", name="x", input={})),
                user(ToolResultContent(tool_use_id="t1"), TextContent(text="and also")),
            ],
            "only tool_result blocks",
            id="results mixed with text",
        ),
        pytest.param(
            [
                assistant(ToolUseContent(id="t1", name="x", input={}), ToolUseContent(id="t2", name="x", input={})),
                user(ToolResultContent(tool_use_id="t1")),
            ],
            r"do not match .*missing: t2",
            id="one result missing",
        ),
        pytest.param(
            [user(ToolResultContent(tool_use_id="t9"))],
            "without a preceding tool_use",
            id="stray result",
        ),
        pytest.param(
            [user(ToolUseContent(id="t1", name="x", input={}))],
            "belong in an assistant turn",
            id="tool_use from the user",
        ),
    ],
)
def test_broken_tool_pairing_is_an_invalid_request(messages: list[SamplingMessage], problem: str) -> None:
    with pytest.raises(InvalidSamplingRequest, match=problem):
        to_llm_request(params(*messages), model=None, max_tokens_cap=None)


def test_a_text_answer_is_a_plain_create_message_result() -> None:
    result = to_create_message_result(LLMResponse("Hello!", "gpt-x-2026", "maxTokens"))

    assert isinstance(result, CreateMessageResult)
    assert result.model_dump(by_alias=True, exclude_none=True, mode="json") == {
        "role": "assistant",
        "content": {"type": "text", "text": "Hello!"},
        "model": "gpt-x-2026",
        "stopReason": "maxTokens",
    }


def test_tool_calls_answer_with_tool_use_blocks() -> None:
    resp = LLMResponse(
        "Let me look.", "claude-x", "toolUse", tool_calls=(ToolCall("t1", "get_weather", {"city": "Paris"}),)
    )

    result = to_create_message_result(resp)

    assert isinstance(result, CreateMessageResultWithTools)
    assert result.model_dump(by_alias=True, exclude_none=True, mode="json") == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Paris"}},
        ],
        "model": "claude-x",
        "stopReason": "toolUse",
    }


def test_tool_calls_without_text_have_only_tool_use_blocks() -> None:
    result = to_create_message_result(LLMResponse("", "m", "toolUse", tool_calls=(ToolCall("t1", "now", {}),)))

    assert isinstance(result, CreateMessageResultWithTools)
    assert result.content_as_list == [ToolUseContent(id="t1", name="now", input={})]


ALLOWED = ["gpt-5-mini", "claude-sonnet-4-5", "claude-haiku-4-5"]


@pytest.mark.parametrize(
    ("hints", "allowed", "default", "expected"),
    [
        (["sonnet"], ALLOWED, "gpt-5-mini", "claude-sonnet-4-5"),
        (["Claude"], ALLOWED, None, "claude-sonnet-4-5"),  # case-insensitive; first allowed match wins
        (["opus", "haiku"], ALLOWED, None, "claude-haiku-4-5"),  # hints are tried in order
        (["opus"], ALLOWED, "gpt-5-mini", "gpt-5-mini"),  # no match: the host default
        (["opus"], ALLOWED, None, None),
        (["sonnet"], [], "llama3", "llama3"),  # no allowed list: servers cannot choose
        ([], ALLOWED, "gpt-5-mini", "gpt-5-mini"),
        ([""], ALLOWED, "gpt-5-mini", "gpt-5-mini"),  # an empty hint matches nothing
    ],
)
def test_pick_model(hints: list[str], allowed: list[str], default: str | None, expected: str | None) -> None:
    assert pick_model(hints, allowed, default) == expected


def test_model_hints_keep_the_servers_order() -> None:
    prefs = ModelPreferences(hints=[ModelHint(name="sonnet"), ModelHint(), ModelHint(name="gpt")])

    assert model_hints(params(user(TextContent(text="x")), model_preferences=prefs)) == ["sonnet", "gpt"]
    assert model_hints(params(user(TextContent(text="x")))) == []
