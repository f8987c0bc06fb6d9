"""Typed settings for the Slack adapter, built from the raw `chat.slack` block of the config.

The config schema (bridge/config/schema.json) has already checked the shape and `config.from_mapping` the
mode/token combinations; this module only applies defaults and types, so the adapter never reads a raw mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from bridge.config.file import connection_limits
from bridge.web.guard import ConnectionLimits

DEFAULT_API_URL = "https://slack.com/api/"


@dataclass(frozen=True, slots=True)
class HttpSettings:
    host: str = "0.0.0.0"
    port: int = 3000
    """0 picks a free port (tests); `SlackAdapter.http_url` tells which one."""
    path: str = "/slack/events"
    """One path for events, interactivity, select options and the slash command, as in the app manifest."""
    connections: ConnectionLimits = field(default_factory=ConnectionLimits)
    """Deadlines and caps that shed slow and idle clients (the same keys as the `http:` block)."""


@dataclass(frozen=True, slots=True)
class SlackSettings:
    bot_token: str = field(repr=False)
    app_token: str = field(default="", repr=False)
    signing_secret: str = field(default="", repr=False)
    mode: Literal["socket", "http"] = "socket"
    api_url: str = DEFAULT_API_URL
    http: HttpSettings = HttpSettings()
    slash_command: str = "/mcp"
    allowed_channels: frozenset[str] = frozenset()
    """Channel ids the bot answers in; empty means every channel it is invited to."""
    allowed_users: frozenset[str] = frozenset()
    """User ids (`U…`, or actor keys `slack:U…`) who may use the bot; empty means everyone in the workspace."""

    def channel_allowed(self, channel: str) -> bool:
        return not self.allowed_channels or channel in self.allowed_channels

    def user_allowed(self, user_id: str) -> bool:
        return not self.allowed_users or user_id in self.allowed_users or f"slack:{user_id}" in self.allowed_users


def from_mapping(raw: Mapping[str, Any]) -> SlackSettings:
    """Build settings from the `chat.slack` mapping (already validated by the config schema)."""
    http = raw.get("http") or {}
    api_url = str(raw.get("api_url") or DEFAULT_API_URL)
    # slack_sdk joins base_url and the method name by plain concatenation.
    if not api_url.endswith("/"):
        api_url += "/"
    mode = raw.get("mode", "socket")
    if mode not in ("socket", "http"):
        raise ValueError(f"chat.slack.mode must be socket or http, not {mode!r}")
    return SlackSettings(
        bot_token=str(raw["bot_token"]),
        app_token=str(raw.get("app_token", "")),
        signing_secret=str(raw.get("signing_secret", "")),
        mode=mode,
        api_url=api_url,
        http=HttpSettings(host=str(http.get("host", "0.0.0.0")), port=int(http.get("port", 3000)),
                          path=str(http.get("path", "/slack/events")), connections=connection_limits(http)),
        slash_command=str(raw.get("slash_command", "/mcp")),
        allowed_channels=frozenset(map(str, raw.get("allowed_channels") or ())),
        allowed_users=frozenset(map(str, raw.get("allowed_users") or ())),
    )
