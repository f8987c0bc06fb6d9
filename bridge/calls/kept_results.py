"""Tool results too long for a chat message: the start goes to chat, the rest is kept (bounded) for `show <id>`.

A server may answer with megabytes. Chat gets the first `MAX_TEXT` characters and a note naming the id to show the
rest with; the bridge keeps at most `limits.tool_result_size` characters of each result, and the most recent ones up
to `Limits.kept_results_size` in all (the oldest are forgotten first), so a 50 MB result costs a bounded amount of
memory once it has been reported.
"""

from __future__ import annotations

from mcp.types import CallToolResult

from bridge.door.model import ConversationKey
from bridge.requests.request_context import new_id
from bridge.safety.limits import Limits
from bridge.safety.lru import ByteLRU
from bridge.text.plain import MAX_TEXT, result_excerpt, shorten


class KeptResults:
    def __init__(self, limits: Limits) -> None:
        self._limit = limits.tool_result_size
        self._kept: ByteLRU[tuple[str, str], str] = ByteLRU(limits.kept_results_size)

    def message(self, conversation: ConversationKey, head: str, result: CallToolResult) -> str:
        """The chat message reporting `result`: all of it, or its start and how to see the rest. Built from at most
        `limits.tool_result_size` characters of it (`result_excerpt`), whatever its size."""
        excerpt = result_excerpt(result, self._limit)
        if excerpt.length <= MAX_TEXT:
            return f"{head}\n{excerpt.text()}"
        text = excerpt.text()
        if excerpt.left_out:
            text += (f"\n… [{excerpt.left_out} more characters not kept: the bridge keeps at most {self._limit} "
                     "characters of a result (limits.tool_result_size)]")
        result_id = new_id()
        self._kept.put((conversation.id(), result_id), text, len(text))
        return f"{head}\n{shorten(text, MAX_TEXT - 100)}\n(`show {result_id}` shows all of it)"

    def get(self, conversation: ConversationKey, result_id: str) -> str | None:
        """A kept result, only in the conversation it was reported in."""
        return self._kept.get((conversation.id(), result_id))
