"""The `response_url` of each person's latest click in each channel: the way to reach them privately where
`chat.postEphemeral` cannot.

Someone previewing a public channel without joining it can click a card, but an ephemeral message to them fails
(`user_not_in_channel`), as it does in a channel the bot cannot post in. The click's `response_url` still reaches
them, with `response_type: ephemeral`. The core tells a person about their click (a refusal, a late click) through
`ChatPort.notify(conversation, actor, text)`, which does not carry the click, so the adapter keeps the latest URL per
(channel, person) for the port to fall back on. Slack accepts a response URL for 30 minutes.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

LIFETIME = 30 * 60.0
"""Seconds Slack accepts a response_url after the click."""
KEPT = 10_000
"""How many (channel, person) URLs are kept at most; the oldest go first."""


class ResponseUrls:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._urls: OrderedDict[tuple[str, str], tuple[str, float]] = OrderedDict()

    def remember(self, channel: str, user: str, url: object) -> None:
        """Keep the response_url of a person's click or slash command in a channel (if there is one)."""
        if not (isinstance(url, str) and url.startswith(("https://", "http://")) and channel and user):
            return
        key = (channel, user)
        self._urls[key] = (url, self._clock() + LIFETIME)
        self._urls.move_to_end(key)
        if len(self._urls) > KEPT:
            self._urls.popitem(last=False)

    def latest(self, channel: str, user_id: str) -> str | None:
        """The URL of this person's latest click in this channel while Slack still accepts it."""
        entry = self._urls.get((channel, user_id))
        if entry is None or entry[1] <= self._clock():
            return None
        return entry[0]


def channel_of(body: Mapping[str, Any]) -> str:
    """The channel an interaction payload happened in (a card's container, else the payload's channel)."""
    return str((body.get("container") or {}).get("channel_id") or (body.get("channel") or {}).get("id") or "")
