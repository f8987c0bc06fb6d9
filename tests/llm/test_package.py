"""The package surface: exports, `make_provider`, and the human provider."""

from __future__ import annotations

import subprocess
import sys

import pytest

import bridge.llm
from bridge.errors import BridgeError
from bridge.llm import (
    AnthropicProvider,
    HumanAnswerRequired,
    HumanProvider,
    LazyProvider,
    LLMError,
    LLMMessage,
    LLMProvider,
    LLMRequest,
    OpenAIProvider,
    make_provider,
)


def test_all_exports_exist() -> None:
    for name in bridge.llm.__all__:
        assert hasattr(bridge.llm, name), name


def test_llm_errors_belong_to_the_bridge_error_tree() -> None:
    assert issubclass(LLMError, BridgeError)
    assert issubclass(HumanAnswerRequired, LLMError)


@pytest.mark.anyio
async def test_make_provider_builds_each_kind() -> None:
    built: list[LLMProvider] = [
        make_provider("openai", model="gpt-x", api_key="sk-x", base_url="http://127.0.0.1:9/v1", timeout=3),
        make_provider("anthropic", model="claude-x", api_key="sk-x", base_url="http://127.0.0.1:9"),
        make_provider("human"),
    ]
    try:
        assert [type(p) for p in built] == [LazyProvider, LazyProvider, HumanProvider]
        assert [p.name for p in built] == ["openai", "anthropic", "human"]
        assert [p.default_model for p in built] == ["gpt-x", "claude-x", None]
        assert [p.supports_tools for p in built] == [True, True, False]
        # The SDK providers are built (their SDK imported) on first use, once.
        openai, anthropic = built[0], built[1]
        assert isinstance(openai, LazyProvider) and isinstance(anthropic, LazyProvider)
        assert [type(await openai.provider()), type(await anthropic.provider())] == [OpenAIProvider, AnthropicProvider]
        assert await openai.provider() is await openai.provider()
    finally:
        for p in built:
            await p.aclose()


def test_the_sdk_is_imported_on_first_use_not_when_the_provider_is_made() -> None:
    script = ("import sys; from bridge.llm import make_provider; "
              "p = make_provider('anthropic', model='m', api_key='k'); "
              "assert 'anthropic' not in sys.modules and 'openai' not in sys.modules; "
              "make_provider('openai', model='m', api_key='k'); assert 'openai' not in sys.modules")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("name", ["openai", "anthropic"])
def test_a_missing_extra_is_still_found_at_start(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, name, None)  # as if the extra were not installed
    with pytest.raises(LLMError, match=rf"the {name} provider needs the llm extra: .*pip install '\.\[llm\]'"):
        make_provider(name, model="m", api_key="k")


def test_unknown_provider_is_a_config_error() -> None:
    with pytest.raises(ValueError, match="unknown LLM provider 'gemini'; expected one of openai, anthropic, human"):
        make_provider("gemini")


@pytest.mark.anyio
async def test_human_provider_asks_for_a_person() -> None:
    request = LLMRequest([LLMMessage("user", "Summarise this")])

    with pytest.raises(HumanAnswerRequired) as info:
        await HumanProvider().complete(request)

    assert info.value.request is request
    assert not info.value.retryable
