"""HTTP mode with signed requests, Web API failures, and who may use the bot."""

from __future__ import annotations

import logging

import aiohttp
import anyio
import pytest

from bridge.door.model import Status
from tests.adapters.slack import driver
from tests.adapters.slack.conftest import SIGNING_SECRET, running_bridge, slack_settings
from tests.adapters.slack.inline_server import make_server
from tests.adapters.slack.interactions import ROOM, tool_approval
from tests.adapters.slack.test_adapter import asking
from tests.harness.hosts import patient
from tests.harness.slack import FakeSlack, encode_http_body, sign_request, slash_command

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]


async def test_a_signed_slash_command_runs_over_http_and_a_bad_signature_gets_401(slack: FakeSlack) -> None:
    settings = slack_settings(slack, mode="http")
    async with running_bridge(slack, {"inline": make_server()}, settings=settings) as bridge, \
            aiohttp.ClientSession() as http:
        url = bridge.adapter.http_url
        command = slash_command("U1", "C1", 'call inline echo {"message": "over http"}',
                                response_url=slack.response_url)
        body, content_type = encode_http_body("slash_commands", command)
        forged = sign_request("wrong-secret", body) | {"Content-Type": content_type}
        async with http.post(url, data=body, headers=forged) as response:
            assert response.status == 401
        signed = sign_request(SIGNING_SECRET, body) | {"Content-Type": content_type}
        with anyio.fail_after(patient(10)):
            async with http.post(url, data=body, headers=signed) as response:
                assert (response.status, await response.text()) == (200, "")
            anchor = await slack.wait_for_call("chat.postMessage", lambda c: "ran" in str(c.args.get("text")))
            result = await slack.wait_for_call("chat.postMessage",
                                               lambda c: "echo: over http" in str(c.args.get("text")))
    assert anchor.args["text"] == "<@U1> ran `/mcp call inline echo` (the rest of the command is shown only to them)"
    assert result.args["thread_ts"] == anchor.response["ts"]  # the anchor's thread is the conversation
    assert len(slack.calls_to("chat.postMessage")) == 2  # the forged request did nothing


async def test_a_rate_limited_post_is_retried(slack: FakeSlack) -> None:
    slack.fail_next("chat.postMessage", "ratelimited", retry_after=0)
    async with running_bridge(slack, {}) as bridge:
        with anyio.fail_after(patient(10)):
            async with asking(bridge, tool_approval()):
                card = await driver.wait_card(slack, ROOM.thread)
                await driver.click(slack, card, "mcp.decline")
    assert [(c.status, c.ok) for c in slack.calls_to("chat.postMessage")] == [(429, False), (200, True)]


async def test_a_failed_post_is_logged_and_the_bridge_keeps_working(slack: FakeSlack,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    async with running_bridge(slack, {"inline": make_server()}) as bridge:
        with anyio.fail_after(patient(10)):
            slack.fail_next("chat.postMessage", "channel_not_found")
            await driver.mention(slack, 'call inline echo {"message": "lost"}', "1800000000.000100")
            await slack.wait_for_call("chat.postMessage", lambda c: c.response.get("error") == "channel_not_found")
            slack.fail_next("chat.postMessage", "channel_not_found")
            async with asking(bridge, tool_approval()) as outcomes:
                pass
            await driver.mention(slack, 'call inline echo {"message": "still here"}', "1800000000.000200")
            await slack.wait_for_call("chat.postMessage", lambda c: "still here" in str(c.args.get("text")))
    assert outcomes[0].status is Status.FAILED and "channel_not_found" in outcomes[0].reason
    assert any("channel_not_found" in r.getMessage() for r in caplog.records if r.name == "bridge.cards.chat")


async def test_people_outside_allowed_users_are_refused_privately(slack: FakeSlack) -> None:
    settings = slack_settings(slack, allowed_users=["U1"], allowed_channels=["C1"])
    async with running_bridge(slack, {"inline": make_server()}, settings=settings) as bridge:
        with anyio.fail_after(patient(10)):
            await driver.mention(slack, "help", "1800000000.000100", user="U2")
            refusal = await slack.wait_for_call("chat.postEphemeral")
            await driver.mention(slack, "help", "1800000000.000200", channel="C9")
            async with asking(bridge, tool_approval()) as outcomes:
                card = await driver.wait_card(slack, ROOM.thread)
                await driver.click(slack, card, "mcp.accept", user="U2")
                await slack.wait_for_call("chat.postEphemeral", lambda c: c is not refusal)
                await driver.click(slack, card, "mcp.accept")
    assert (refusal.args["user"], refusal.args["text"]) == ("U2", "You are not allowed to use this bridge here.")
    assert outcomes[0].by is not None and outcomes[0].by.user_id == "U1"
    assert not [c for c in slack.calls_to("chat.postMessage") if c.args.get("channel") == "C9"]
    assert not [c for c in slack.calls_to("chat.postMessage") if "Commands" in str(c.args.get("text"))]
