"""Slack's HTTP mode at its edge: malformed signatures and bodies are refused with a 4xx and never logged, and
half-sent requests are dropped at the deadline."""

from __future__ import annotations

import logging
import socket

import aiohttp
import anyio
import pytest

from bridge.cli import setup_logging
from tests.adapters.slack.conftest import SIGNING_SECRET, running_bridge, slack_settings
from tests.slackfake import FakeSlack, encode_http_body, sign_request, slash_command

pytestmark = pytest.mark.anyio

SECRET = "hunter2-SECRET-VALUE-42"


def malformed(url_secret: str) -> list[tuple[str, str, dict[str, str]]]:
    """(what, body, headers): each must be refused with a 4xx."""
    command, content_type = encode_http_body("slash_commands", slash_command("U1", "C1", f"call x y {url_secret}"))
    form = {"Content-Type": content_type}
    signed = sign_request(SIGNING_SECRET, command)
    bad_json = '{"type": "block_actions", "token": "' + url_secret + '", '
    return [
        ("non-numeric timestamp", command, form | signed | {"X-Slack-Request-Timestamp": "soon"}),
        ("timestamp with spaces", command, form | signed | {"X-Slack-Request-Timestamp": " 1 2 "}),
        ("huge timestamp", command, form | signed | {"X-Slack-Request-Timestamp": "9" * 400}),
        ("signature not v0=hex", command, form | signed | {"X-Slack-Signature": "v0=zz" + "\u00e9"}),
        ("empty signature", command, form | signed | {"X-Slack-Signature": ""}),
        ("no signature", command, form | {"X-Slack-Request-Timestamp": signed["X-Slack-Request-Timestamp"]}),
        ("unsigned malformed JSON", bad_json, {"Content-Type": "application/json"}),
        ("unsigned malformed payload", "payload=" + bad_json, {"Content-Type": "application/x-www-form-urlencoded"}),
        ("wrongly signed", command, form | sign_request("another-secret", command)),
    ]


@pytest.mark.parametrize("level", ["debug", "info", "warning"])
async def test_malformed_requests_get_a_4xx_and_their_bodies_are_never_logged(
        slack: FakeSlack, level: str, capsys: pytest.CaptureFixture[str]) -> None:
    setup_logging(level, json_lines=False)
    async with running_bridge(slack, {}, settings=slack_settings(slack, mode="http")) as bridge, \
            aiohttp.ClientSession() as http:
        url = bridge.adapter.http_url
        statuses = {}
        with anyio.fail_after(30):
            for what, body, headers in malformed(SECRET):
                async with http.post(url, data=body.encode(), headers=headers) as response:
                    statuses[what] = response.status
    logged = capsys.readouterr().err
    logging.getLogger().handlers.clear()
    assert {what: status for what, status in statuses.items() if not 400 <= status < 500} == {}
    assert SECRET not in logged
