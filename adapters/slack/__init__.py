"""Slack adapter: MCP interactions as Block Kit cards and modals, over Socket Mode or HTTP (slack-bolt).

Modules: `settings` (typed config), `escape` (untrusted text for mrkdwn), `elements`/`render`/`modal` (pure Block
Kit), `ids` (action and block ids), `translate` (payloads into core values), `client` (Web API client and error
translation), `adapter` (bolt wiring and the `ChatPort`). Setup is described in docs/slack.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from adapters.slack.adapter import SlackAdapter
from adapters.slack.settings import SlackSettings, from_mapping
from bridge.config import Config
from bridge.ports import Inbound


def create(host: Inbound, settings: Mapping[str, Any] | SlackSettings, config: Config) -> SlackAdapter:
    """The adapter for the `chat.slack` block; attach it to the host and run `serve()` in the host's lifetime."""
    typed = settings if isinstance(settings, SlackSettings) else from_mapping(settings)
    return SlackAdapter(host, typed, config)


__all__ = ["SlackAdapter", "SlackSettings", "create"]
