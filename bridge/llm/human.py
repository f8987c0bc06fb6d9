"""The "human" provider: no model at all; a person writes every answer.

It lets sampling work on a deployment that has no LLM: `complete` raises
`HumanAnswerRequired`, and the host's sampling review step asks the approver to
type the reply instead of approving a generated one.
"""

from __future__ import annotations

from bridge.llm.errors import HumanAnswerRequired
from bridge.llm.types import LLMRequest, LLMResponse

__all__ = ["HumanAnswerRequired", "HumanProvider"]


class HumanProvider:
    """An `LLMProvider` that always defers to a person."""

    name = "human"
    supports_tools = False
    default_model: str | None = None

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Raises:
        HumanAnswerRequired: always; it carries the request to show the person.
        """
        raise HumanAnswerRequired(request)

    async def aclose(self) -> None:
        pass
