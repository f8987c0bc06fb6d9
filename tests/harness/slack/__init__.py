"""Test infrastructure for the Slack adapter: a local fake Slack plus builders for what Slack sends.

Point a real bolt ``AsyncApp`` (and ``AsyncSocketModeHandler``) at ``FakeSlack.api_url`` and drive it with
envelopes or signed HTTP requests; see ``test_fake_slack.py`` for the wiring.
"""

from .blockkit import check_http_ack
from .payloads import (
    DEFAULT_RESPONSE_URL,
    block_actions,
    encode_http_body,
    event_app_mention,
    event_callback,
    event_message_im,
    new_trigger_id,
    sign_request,
    slash_command,
    view_closed,
    view_submission,
)
from .server import APP_ID, BOT_ID, BOT_USER_ID, TEAM_ID, Call, EnvelopeType, FakeSlack, Invalid, StoredMessage

__all__ = [
    "APP_ID",
    "BOT_ID",
    "BOT_USER_ID",
    "DEFAULT_RESPONSE_URL",
    "TEAM_ID",
    "Call",
    "EnvelopeType",
    "FakeSlack",
    "Invalid",
    "StoredMessage",
    "block_actions",
    "check_http_ack",
    "encode_http_body",
    "event_app_mention",
    "event_callback",
    "event_message_im",
    "new_trigger_id",
    "sign_request",
    "slash_command",
    "view_closed",
    "view_submission",
]
