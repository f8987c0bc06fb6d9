"""Slack's HTTP mode at its edge: malformed signatures and bodies are refused with a 4xx and never logged, and
half-sent requests are dropped at the deadline."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import aiohttp
import anyio
import pytest
from yarl import URL

from bridge.cli.entry import setup_logging
from bridge.safety import redaction
from tests.adapters.slack.conftest import SIGNING_SECRET, running_bridge, slack_settings
from tests.harness.hosts import patient
from tests.harness.slack import FakeSlack, encode_http_body, sign_request, slash_command

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

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


@pytest.fixture(params=["debug", "info", "warning"])
def bridge_logs(request: pytest.FixtureRequest) -> Iterator[io.StringIO]:
    """The bridge's logging set up as `--log-level LEVEL` sets it, into a buffer; put back afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    levels = {name: logging.getLogger(name).level for name in (*redaction.PAYLOAD_LOGGERS, "aiohttp.access")}
    buffer = io.StringIO()
    setup_logging(request.param, False, buffer)
    try:
        yield buffer
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        for name, old in levels.items():
            logging.getLogger(name).setLevel(old)


async def test_malformed_requests_get_a_4xx_and_their_bodies_are_never_logged(
        slack: FakeSlack, bridge_logs: io.StringIO) -> None:
    async with running_bridge(slack, {}, settings=slack_settings(slack, mode="http")) as bridge, \
            aiohttp.ClientSession() as http:
        url = bridge.adapter.http_url
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        statuses = {}
        with anyio.fail_after(patient(30)):
            for what, body, headers in malformed(SECRET):
                async with http.post(url, data=body.encode(), headers=headers) as response:
                    statuses[what] = response.status
            async with http.post(url, data=b"ssl_check=1&token=x", headers=form) as response:
                ssl_check = response.status  # Slack's certificate check is not signed: bolt answers it, as before
    logged = bridge_logs.getvalue()
    assert {what: status for what, status in statuses.items() if not 400 <= status < 500} == {}
    assert ssl_check == 200
    assert SECRET not in logged


async def test_half_sent_requests_are_dropped_at_the_deadline_and_signed_ones_still_served(slack: FakeSlack) -> None:
    http = {"host": "127.0.0.1", "port": 0, "idle_timeout": "1s", "read_timeout": "2s"}
    settings = slack_settings(slack, mode="http", http=http)
    async with running_bridge(slack, {}, settings=settings) as bridge, aiohttp.ClientSession() as client:
        url = URL(bridge.adapter.http_url)
        body, content_type = encode_http_body("slash_commands", slash_command("U1", "C1", "help",
                                                                            response_url=slack.response_url))
        head = (f"POST {url.path} HTTP/1.1\r\nHost: x\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body) + 100}\r\n")
        half_sent = [b"", head.encode(), (head + "\r\n").encode(), (head + "\r\n" + body).encode()]
        streams = []
        for i in range(20):
            stream = await anyio.connect_tcp(str(url.host), int(url.port or 80))
            await stream.send(half_sent[i % len(half_sent)] or b"P")
            streams.append(stream)
        signed = sign_request(SIGNING_SECRET, body) | {"Content-Type": content_type}
        with anyio.fail_after(patient(30)):
            async with client.post(str(url), data=body.encode(), headers=signed) as response:
                assert response.status == 200  # served while the half-sent ones are held
            for stream in streams:  # each is closed by the bridge (at its deadline, at the latest)
                with pytest.raises((anyio.EndOfStream, anyio.BrokenResourceError)):
                    while await stream.receive():
                        pass
        for stream in streams:
            await stream.aclose()
