"""Slack adapter: MCP interactions as Block Kit cards and modals, over Socket Mode or HTTP (slack-bolt).

Pure: `settings` (typed config), `escape` (untrusted text for mrkdwn), `elements`/`render`/`modal` (Block Kit),
`ids` (action and block ids), `translate` (payloads into core values). I/O: `client` (the one place Web API clients
are made; error translation), `port` (the host's `ChatPort`), `gate` (the allow-list as bolt middleware),
`intake` (messages, slash command), `clicks` (buttons), `modals` (forms in modals, drafts), `home` (App Home),
`people` (names), `threads` (the bot's threads), `background` (work owned by `serve()`), `listeners` (bolt's
routing table) and `adapter` (composes them and serves). Setup is described in docs/slack.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from adapters.slack.adapter import SlackAdapter
from adapters.slack.settings import SlackSettings, from_mapping
from bridge.config.file import Config
from bridge.door.ports import Inbound


def create(host: Inbound, settings: Mapping[str, Any] | SlackSettings, config: Config) -> SlackAdapter:
    """The adapter for the `chat.slack` block; attach it to the host and run `serve()` in the host's lifetime."""
    typed = settings if isinstance(settings, SlackSettings) else from_mapping(settings)
    return SlackAdapter(host, typed, config)


__all__ = ["SlackAdapter", "SlackSettings", "create"]
