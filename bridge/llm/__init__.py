"""The LLM provider layer: one small interface over OpenAI-style and Anthropic APIs.

Used for MCP sampling (a server asks the host's model) and for the host's own
agent loop (the model calls MCP tools). Importing this package never imports an
SDK; `openai` and `anthropic` are loaded when a provider is built.
"""

from __future__ import annotations

from bridge.llm.anthropic_provider import AnthropicProvider
from bridge.llm.errors import HumanAnswerRequired, LLMError
from bridge.llm.human import HumanProvider
from bridge.llm.lazy import LazyProvider
from bridge.llm.openai_provider import OpenAIProvider
from bridge.llm.sampling_convert import (
    InvalidSamplingRequest,
    model_hints,
    pick_model,
    to_create_message_result,
    to_llm_request,
)
from bridge.llm.types import (
    LLMMessage,
    LLMProvider,
    LLMRequest,
    LLMResponse,
    StopReason,
    ToolCall,
    ToolChoiceMode,
    ToolResult,
    ToolSpec,
    Usage,
)

__all__ = [
    "PROVIDERS",
    "AnthropicProvider",
    "HumanAnswerRequired",
    "HumanProvider",
    "InvalidSamplingRequest",
    "LLMError",
    "LLMMessage",
    "LLMProvider",
    "LLMRequest",
    "LLMResponse",
    "LazyProvider",
    "OpenAIProvider",
    "StopReason",
    "ToolCall",
    "ToolChoiceMode",
    "ToolResult",
    "ToolSpec",
    "Usage",
    "make_provider",
    "model_hints",
    "pick_model",
    "to_create_message_result",
    "to_llm_request",
]

PROVIDERS = ("openai", "anthropic", "human")
"""The names `make_provider` accepts (for config validation)."""


def make_provider(
    provider: str,
    *,
    model: str | None = None,
    api_key: str | None = None,
    base_url: str | None = None,
    timeout: float = 60.0,
    max_retries: int = 2,
) -> LLMProvider:
    """Build the configured provider.

    Args:
        provider: One of `PROVIDERS`. "openai" also serves any OpenAI-compatible
            server (Ollama, vLLM, LM Studio, LiteLLM) through `base_url`.
        model: The default model; "human" ignores it.

    The SDK providers are `LazyProvider`s: their SDK is imported on the first completion (`bridge.llm.lazy`).

    Raises:
        ValueError: an unknown provider name (a config mistake, reported at startup).
        LLMError: the provider's SDK extra is missing (missing credentials are found on first use).
    """
    if provider == "openai":
        return LazyProvider("openai", lambda: OpenAIProvider(model, api_key, base_url, timeout, max_retries),
                            default_model=model)
    if provider == "anthropic":
        return LazyProvider("anthropic", lambda: AnthropicProvider(model, api_key, base_url, timeout, max_retries),
                            default_model=model)
    if provider == "human":
        return HumanProvider()
    raise ValueError(f"unknown LLM provider {provider!r}; expected one of {', '.join(PROVIDERS)}")
