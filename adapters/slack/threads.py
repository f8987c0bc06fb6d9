"""The threads the bot takes part in: replies there are addressed to it without a mention, even after a restart.

Kept in the adapter's own persistent state (`Inbound.adapter_state("slack")`), cached in memory both ways: every
message in a channel the bot is in asks whether its thread is one of the bot's, and most are not, so a thread found
not to be one is remembered too, and the state is read about once per thread, not once per message. That memory
lasts `NOT_OURS_FOR` seconds: with several workers on one store, another worker may answer in the thread meanwhile.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from bridge.door.ports import AdapterState

BOT_THREAD = "bot_thread"
"""Key prefix of a thread the bot takes part in, in the adapter's state."""
NOT_OURS_KEPT = 10_000
"""How many threads found not to be the bot's are remembered; the least recently asked are forgotten first."""
NOT_OURS_FOR = 30.0
"""Seconds a thread found not to be the bot's is believed so without asking the state again."""


class BotThreads:
    def __init__(self, state: AdapterState, clock: Callable[[], float] = time.monotonic) -> None:
        self._state = state
        self._clock = clock
        self._known: set[tuple[str, str]] = set()
        """(channel, thread ts) known to be the bot's: a cache of `_state`."""
        self._not_ours: OrderedDict[tuple[str, str], float] = OrderedDict()
        """(channel, thread ts) looked up in `_state` and not found, and when."""

    async def remember(self, team: str, channel: str, thread: str) -> None:
        if (channel, thread) not in self._known:
            self._known.add((channel, thread))
            self._not_ours.pop((channel, thread), None)
            await self._state.set(_key(team, channel, thread), "1")

    async def includes(self, team: str, channel: str, thread: str) -> bool:
        """Whether the bot takes part in this thread: cached, else from the state (an earlier run's threads)."""
        if not thread:
            return False
        where = (channel, thread)
        if where in self._known:
            return True
        now, seen = self._clock(), self._not_ours.get(where)
        if seen is not None and now - seen < NOT_OURS_FOR:
            self._not_ours.move_to_end(where)
            return False
        if await self._state.get(_key(team, channel, thread)) == "1":
            self._known.add(where)
            self._not_ours.pop(where, None)
            return True
        self._not_ours[where] = now
        self._not_ours.move_to_end(where)
        if len(self._not_ours) > NOT_OURS_KEPT:
            self._not_ours.popitem(last=False)
        return False


def _key(team: str, channel: str, thread: str) -> str:
    return f"{BOT_THREAD}/{team}/{channel}/{thread}"
