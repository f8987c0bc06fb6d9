"""The threads the bot takes part in: replies there are addressed to it without a mention, even after a restart.

Kept in the adapter's own persistent state (`Inbound.adapter_state("slack")`), cached in memory.
"""

from __future__ import annotations

from bridge.ports import AdapterState

BOT_THREAD = "bot_thread"
"""Key prefix of a thread the bot takes part in, in the adapter's state."""


class BotThreads:
    def __init__(self, state: AdapterState) -> None:
        self._state = state
        self._known: set[tuple[str, str]] = set()
        """(channel, thread ts) known to be the bot's: a cache of `_state`."""

    async def remember(self, team: str, channel: str, thread: str) -> None:
        if (channel, thread) not in self._known:
            self._known.add((channel, thread))
            await self._state.set(_key(team, channel, thread), "1")

    async def includes(self, team: str, channel: str, thread: str) -> bool:
        """Whether the bot takes part in this thread: cached, else from the state (an earlier run's threads)."""
        if not thread:
            return False
        if (channel, thread) in self._known:
            return True
        if await self._state.get(_key(team, channel, thread)) == "1":
            self._known.add((channel, thread))
            return True
        return False


def _key(team: str, channel: str, thread: str) -> str:
    return f"{BOT_THREAD}/{team}/{channel}/{thread}"
