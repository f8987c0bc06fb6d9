"""Builders for what Slack sends to an app: Events API callbacks, interactivity payloads, slash commands.

Why: adapter tests should feed the app the same JSON Slack would, not hand-trimmed dicts that happen to satisfy
today's code. Shapes follow Slack's docs and bolt-python's own test payloads; fields the bridge never reads are
kept when bolt's matchers or middleware look at them (``type``, ``team``, ``authorizations``, ``view.callback_id``).

The same payload goes into a Socket Mode envelope (``FakeSlack.send_envelope``) or, via ``encode_http_body`` and
``sign_request``, into a signed HTTP request for an app running in HTTP mode.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any
from urllib.parse import quote, urlencode

from slack_sdk.signature import SignatureVerifier

from .server import APP_ID, BOT_ID, BOT_USER_ID, TEAM_ID, EnvelopeType

JSON = dict[str, Any]

VERIFICATION_TOKEN = "verification_token"
"""The legacy ``token`` field Slack still puts in payloads; bolt ignores it."""

# ``.invalid`` never resolves (RFC 2606): an app that calls respond() without a test-supplied URL fails fast.
DEFAULT_RESPONSE_URL = "https://hooks.slack.invalid/commands/T111/1/fake"


def new_trigger_id() -> str:
    return f"{int(time.time())}.{uuid.uuid4().int % 10**12}.{uuid.uuid4().hex}"


def event_callback(event: JSON) -> JSON:
    """Wrap an event the way the Events API delivers it (the ``payload`` of an ``events_api`` envelope)."""
    return {
        "token": VERIFICATION_TOKEN,
        "team_id": TEAM_ID,
        "api_app_id": APP_ID,
        "event": event,
        "type": "event_callback",
        "event_id": f"Ev{uuid.uuid4().hex[:10].upper()}",
        "event_time": int(float(event["event_ts"])),
        "authorizations": [
            {
                "enterprise_id": None,
                "team_id": TEAM_ID,
                "user_id": BOT_USER_ID,
                "is_bot": True,
                "is_enterprise_install": False,
            }
        ],
        "is_ext_shared_channel": False,
    }


def event_app_mention(user: str, channel: str, text: str, ts: str, thread_ts: str | None = None) -> JSON:
    """An ``app_mention`` event callback; ``text`` should include the ``<@UBOT>`` mention, as Slack's does."""
    return event_callback(_message_event("app_mention", user, channel, text, ts, thread_ts))


def event_message_im(user: str, channel: str, text: str, ts: str, thread_ts: str | None = None) -> JSON:
    """A ``message`` event from a DM (``message.im`` subscription; ``channel`` is normally a ``D…`` id)."""
    return event_callback(_message_event("message", user, channel, text, ts, thread_ts) | {"channel_type": "im"})


def block_actions(
    user: str,
    channel: str,
    message_ts: str,
    action_id: str,
    value: str,
    block_id: str = "b",
    trigger_id: str | None = None,
    state_values: JSON | None = None,
    *,
    message: JSON | None = None,
    response_url: str = DEFAULT_RESPONSE_URL,
) -> JSON:
    """A button click in a message (``interactive`` envelope). ``message`` is the clicked message, if it matters."""
    return {
        "type": "block_actions",
        "user": _user(user),
        "api_app_id": APP_ID,
        "token": VERIFICATION_TOKEN,
        "container": {"type": "message", "message_ts": message_ts, "channel_id": channel, "is_ephemeral": False},
        "trigger_id": trigger_id or new_trigger_id(),
        "team": {"id": TEAM_ID, "domain": "fake"},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": channel, "name": f"channel-{channel.lower()}"},
        "message": message or {"type": "message", "user": BOT_USER_ID, "bot_id": BOT_ID, "text": "", "ts": message_ts},
        "state": {"values": state_values or {}},
        "response_url": response_url,
        "actions": [
            {
                "action_id": action_id,
                "block_id": block_id,
                "text": {"type": "plain_text", "text": "Button", "emoji": True},
                "value": value,
                "type": "button",
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }


def view_submission(
    user: str,
    view_id: str,
    callback_id: str,
    private_metadata: str,
    state_values: JSON,
    *,
    blocks: list[JSON] | None = None,
    trigger_id: str | None = None,
) -> JSON:
    """A modal's Submit (``interactive`` envelope). ``state_values`` is ``{block_id: {action_id: {...}}}``."""
    return {
        "type": "view_submission",
        "team": {"id": TEAM_ID, "domain": "fake"},
        "user": _user(user),
        "api_app_id": APP_ID,
        "token": VERIFICATION_TOKEN,
        "trigger_id": trigger_id or new_trigger_id(),
        "view": _view(view_id, callback_id, private_metadata, blocks) | {"state": {"values": state_values}},
        "response_urls": [],
        "is_enterprise_install": False,
    }


def view_closed(user: str, view_id: str, callback_id: str, private_metadata: str, *, is_cleared: bool = False) -> JSON:
    """A modal dismissed with Cancel or ×; Slack sends it only for views opened with ``notify_on_close``."""
    return {
        "type": "view_closed",
        "team": {"id": TEAM_ID, "domain": "fake"},
        "user": _user(user),
        "api_app_id": APP_ID,
        "token": VERIFICATION_TOKEN,
        "view": _view(view_id, callback_id, private_metadata, None) | {"notify_on_close": True},
        "is_cleared": is_cleared,
        "is_enterprise_install": False,
    }


def slash_command(
    user: str,
    channel: str,
    text: str,
    command: str = "/mcp",
    *,
    trigger_id: str | None = None,
    response_url: str = DEFAULT_RESPONSE_URL,
) -> dict[str, str]:
    """A slash command, with ``text`` as the person typed it. Like Slack, the builder escapes ``&``, ``<`` and ``>``
    in it (as in message text). All values are strings because over HTTP Slack sends it form-encoded."""
    return {
        "token": VERIFICATION_TOKEN,
        "team_id": TEAM_ID,
        "team_domain": "fake",
        "channel_id": channel,
        "channel_name": f"channel-{channel.lower()}",
        "user_id": user,
        "user_name": user.lower(),
        "command": command,
        "text": text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"),
        "api_app_id": APP_ID,
        "is_enterprise_install": "false",
        "response_url": response_url,
        "trigger_id": trigger_id or new_trigger_id(),
    }


def encode_http_body(type_: EnvelopeType, payload: JSON) -> tuple[str, str]:
    """The HTTP-mode body and content type for a payload: JSON for events, ``payload=<json>`` form for
    interactivity, plain form fields for slash commands."""
    match type_:
        case "events_api":
            return json.dumps(payload), "application/json"
        case "interactive":
            return f"payload={quote(json.dumps(payload))}", "application/x-www-form-urlencoded"
        case "slash_commands":
            return urlencode(payload), "application/x-www-form-urlencoded"


def sign_request(signing_secret: str, body: str, timestamp: int | str | None = None) -> dict[str, str]:
    """Slack's request-signing headers for ``body``, made by slack_sdk itself so they match what bolt verifies."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    signature = SignatureVerifier(signing_secret).generate_signature(timestamp=ts, body=body)
    assert signature is not None  # only None when the timestamp is None
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": signature}


def _message_event(type_: str, user: str, channel: str, text: str, ts: str, thread_ts: str | None) -> JSON:
    event: JSON = {
        "type": type_,
        "user": user,
        "text": text,
        "ts": ts,
        "channel": channel,
        "event_ts": ts,
        "team": TEAM_ID,
        "client_msg_id": str(uuid.uuid4()),
        "blocks": [
            {
                "type": "rich_text",
                "block_id": "rt",
                "elements": [{"type": "rich_text_section", "elements": [{"type": "text", "text": text}]}],
            }
        ],
    }
    if thread_ts is not None:
        event["thread_ts"] = thread_ts
    return event


def _user(user: str) -> JSON:
    return {"id": user, "username": user.lower(), "name": user.lower(), "team_id": TEAM_ID}


def _view(view_id: str, callback_id: str, private_metadata: str, blocks: list[JSON] | None) -> JSON:
    return {
        "id": view_id,
        "team_id": TEAM_ID,
        "type": "modal",
        "blocks": blocks or [],
        "private_metadata": private_metadata,
        "callback_id": callback_id,
        "state": {"values": {}},
        "hash": "1700000000.fakehash",
        "title": {"type": "plain_text", "text": "MCP"},
        "clear_on_close": False,
        "notify_on_close": False,
        "close": {"type": "plain_text", "text": "Cancel"},
        "submit": {"type": "plain_text", "text": "Submit"},
        "previous_view_id": None,
        "root_view_id": view_id,
        "app_id": APP_ID,
        "external_id": "",
        "app_installed_team_id": TEAM_ID,
        "bot_id": BOT_ID,
    }
