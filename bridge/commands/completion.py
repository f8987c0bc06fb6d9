"""What may come next on a command line, for a terminal's Tab completion: a command word, a server this
conversation may use, or one of that server's tools (`call SERVER <Tab>`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from bridge.commands.parsing import NAMES

SERVER_FIRST = frozenset({"tools", "call", "prompts", "prompt", "resources", "read", "logout"})
"""Commands whose first argument is a server's name."""


async def next_words(before: Sequence[str], servers: Sequence[str],
                     tools: Callable[[str], Awaitable[Sequence[str]]]) -> list[str]:
    """The words that may follow `before` (the complete words typed so far, without the platform's prefix)."""
    if not before:
        return list(NAMES)
    command = before[0].lower()
    if len(before) == 1 and command in SERVER_FIRST:
        return list(servers)
    if len(before) == 2 and command == "call" and before[1] in servers:
        return list(await tools(before[1]))
    return []
