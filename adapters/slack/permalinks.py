"""Message permalinks, built from the workspace's address and the message's channel and ts (pure).

Slack's `chat.getPermalink` answers exactly this shape (`https://acme.slack.com/archives/C1/p1700000000000200`, with
`?thread_ts=…&cid=…` for a reply in a thread), so a card's link costs no Web API call: it is built once when the card
is posted and kept in the card's reference (`CardRef.data["permalink"]`), which the store keeps across restarts.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlencode

PERMALINK = "permalink"
"""The key of a card's permalink in `CardRef.data`."""


def permalink(workspace_url: str, channel: str, ts: str, thread: str | None = None) -> str | None:
    """The permalink of message `ts` in `channel` (a reply in `thread`), or None without a workspace address."""
    if not workspace_url or not channel or not ts:
        return None
    link = f"{workspace_url.rstrip('/')}/archives/{channel}/p{ts.replace('.', '')}"
    if thread and thread != ts:
        link += "?" + urlencode({"thread_ts": thread, "cid": channel})
    return link


def of_card(data: Mapping[str, str], workspace_url: str, thread: str | None) -> str | None:
    """A card's stored permalink, or one built from its channel and ts (cards posted before links were stored)."""
    stored = data.get(PERMALINK)
    if stored:
        return stored
    return permalink(workspace_url, data.get("channel", ""), data.get("ts", ""), thread)
