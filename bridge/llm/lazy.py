"""A provider whose SDK is loaded on its first completion, not when the bridge starts.

`openai` and `anthropic` take one to three seconds to import; most bridges answer many commands before a model is
asked anything, and some never ask one. Whether the extra is installed is still checked at start (a config mistake
is reported at once); the SDK itself, and the credentials it resolves, are met on first use, and a failure there is
an `LLMError` like any other the provider raises.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

import anyio

from bridge.llm.errors import missing_extra
from bridge.llm.types import LLMProvider, LLMRequest, LLMResponse


class LazyProvider:
    def __init__(self, name: str, build: Callable[[], LLMProvider], *, default_model: str | None,
                 supports_tools: bool = True) -> None:
        if importlib.util.find_spec(name) is None:
            raise missing_extra(name)
        self.name = name
        self.default_model = default_model
        self.supports_tools = supports_tools
        self._build = build
        self._built: LLMProvider | None = None
        self._lock = anyio.Lock()

    async def provider(self) -> LLMProvider:
        """The real provider, built (its SDK imported) by the first caller; the others wait for it."""
        async with self._lock:
            if self._built is None:
                self._built = self._build()
            return self._built

    async def complete(self, request: LLMRequest) -> LLMResponse:
        return await (await self.provider()).complete(request)

    async def aclose(self) -> None:
        if self._built is not None:
            await self._built.aclose()
