"""Provider-neutral values that cross the LLM layer's boundary.

Both users of the layer speak these types only: the sampling handler (after
`sampling_convert`) and the host's own agent loop. No SDK type leaks out of a
provider, so the rest of the bridge type-checks and runs without the `llm` extra.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

Role = Literal["user", "assistant"]
ToolChoiceMode = Literal["auto", "required", "none"]
StopReason = Literal["endTurn", "maxTokens", "stopSequence", "toolUse"] | str
"""MCP's stop reasons; providers pass other values (e.g. "refusal") through unchanged."""


@dataclass(frozen=True)
class ToolSpec:
    """A tool the model may call."""

    name: str
    description: str
    input_schema: dict[str, Any]
    """A JSON Schema object for the arguments (`type: "object"` at the root)."""


@dataclass(frozen=True)
class ToolCall:
    """The model asking to run a tool."""

    id: str
    """The provider's call id; the matching `ToolResult.call_id` must repeat it."""
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ToolResult:
    """What a tool call produced, fed back to the model in a user turn."""

    call_id: str
    content: str
    is_error: bool = False


@dataclass(frozen=True)
class LLMMessage:
    """One conversation turn.

    An assistant turn may carry `tool_calls`; the user turn that follows carries one
    `ToolResult` per call. Text and tool data may share a turn.
    """

    role: Role
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_results: tuple[ToolResult, ...] = ()


@dataclass(frozen=True)
class LLMRequest:
    """Everything a provider needs for one completion."""

    messages: Sequence[LLMMessage]
    system: str | None = None
    max_tokens: int = 1024
    temperature: float | None = None
    """Advisory: a provider whose API no longer accepts it (Anthropic) ignores it."""
    stop: Sequence[str] = ()
    tools: Sequence[ToolSpec] = ()
    tool_choice: ToolChoiceMode | None = None
    """None leaves the provider's default (which is "auto" for both APIs)."""
    model: str | None = None
    """None means the provider's `default_model`."""


@dataclass(frozen=True)
class Usage:
    """Tokens one completion used, as the provider reported them (what budgets count)."""

    input_tokens: int
    output_tokens: int

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class LLMResponse:
    """The model's answer."""

    text: str
    model: str
    """The model that actually answered, as the endpoint reported it."""
    stop_reason: StopReason
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None
    """None when the endpoint reported none (some compatible servers omit it)."""


class LLMProvider(Protocol):
    """A configured model endpoint.

    Implementations raise `LLMError` (and nothing else) from `complete`.
    """

    name: str
    """"openai", "anthropic" or "human"."""
    supports_tools: bool
    default_model: str | None

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Run one completion."""
        ...

    async def aclose(self) -> None:
        """Release the HTTP connection pool; the provider is unusable afterwards."""
        ...
