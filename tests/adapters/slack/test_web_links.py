"""Fill in on the web from Slack: the real adapter against the fake Slack, the bridge's HTTP server with web forms,
server-everything over stdio, and Debian's Chromium filling the form on a phone-sized screen.

The card is public, so it carries no link: a click on "Fill in on the web" makes one for the clicker, sent to them
alone (an ephemeral message, or their click's response_url where Slack refuses that). Someone who may not answer gets
the usual private refusal and no link.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest
from playwright.async_api import Browser

from adapters.slack import ids
from bridge.config.file import ServerConfig
from bridge.web.forms import WebForms
from bridge.web.server import HttpServer
from tests.adapters.slack import driver
from tests.adapters.slack.conftest import Bridge, running_bridge
from tests.harness.hosts import patient
from tests.harness.slack import Call, FakeSlack, block_actions
from tests.webform import test_browser as web

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

browser = web.browser  # Debian's Chromium through Playwright (the web form tests' fixture)

CALL = "call everything trigger-elicitation-request"
LINK = re.compile(r"<(http://127\.0\.0\.1:\d+/form/[A-Za-z0-9_.\-]+)\|Open the form>")


@asynccontextmanager
async def with_web_forms(bridge: Bridge) -> AsyncIterator[HttpServer]:
    """The bridge's one HTTP server on a free loopback port, with the web-form routes, offered to the cards (as
    `bridge.cli` does when `http.listen` and `http.public_url` are set)."""
    server = HttpServer("127.0.0.1:0")
    bridge.host.offer_web_forms(WebForms(bridge.host, server))
    async with anyio.create_task_group() as tg:
        await tg.start(server.serve)
        yield server
        tg.cancel_scope.cancel()


def link_in(call: Call) -> str:
    match = LINK.search(str(call.args.get("text", "")))
    assert match, call.args
    return match.group(1)


async def test_the_clickers_link_comes_privately_and_a_browser_answer_finishes_the_card(
        slack: FakeSlack, everything: ServerConfig, browser: Browser) -> None:
    async with running_bridge(slack, {"everything": everything}) as bridge, with_web_forms(bridge):
        with anyio.fail_after(patient(60)):
            await driver.mention(slack, CALL, "1800000000.000100")
            card = await driver.wait_card(slack, "1800000000.000100")
            assert card.actions() == [ids.OPEN_FORM, ids.WEB_FORM, ids.DECLINE, ids.CANCEL]
            assert "/form/" not in json.dumps(card.blocks)  # the public card carries no link

            # A stranger's click: the usual private refusal, and no link.
            ack = await driver.click(slack, card, ids.WEB_FORM, user="U2")
            assert list(ack) == ["envelope_id"]  # acked at once, nothing in the ack
            refusal = await slack.wait_for_call("chat.postEphemeral", lambda c: c.args["user"] == "U2")
            assert refusal.args["text"] == "Only ada.lovelace can answer this request."

            await driver.click(slack, card, ids.WEB_FORM)
            private = await slack.wait_for_call("chat.postEphemeral", lambda c: c.args["user"] == "U1")
            assert (private.args["channel"], private.args["thread_ts"]) == ("C1", "1800000000.000100")
            link = link_in(private)
            posted = json.dumps([c.args for c in slack.calls_to("chat.postMessage")])
            assert link not in posted and "/form/" not in posted  # never in the channel

            page = await web.phone_page(browser)
            opened = await page.goto(link)
            assert opened is not None and opened.status == 200
            await web.fill_everything(page, email="ada@example.com")
            assert (await web.press(page, "Submit")).status == 200
            assert await page.get_by_role("heading").inner_text() == "Thanks — sent"
            result = await driver.raw_result(slack, "1800000000.000100")
            update = await slack.wait_for_call("chat.update", lambda c: c.args["ts"] == card.ts)
    assert result == {"action": "accept", "content": web.EVERYTHING_ANSWER}
    final = json.dumps(update.args["blocks"])
    assert "Accepted by <@U1>" in final and ids.WEB_FORM not in final
    assert all("/form/" not in str(c.args) for c in slack.calls_to("chat.postEphemeral") if c.args["user"] == "U2")


async def test_where_an_ephemeral_message_fails_the_link_goes_by_the_clicks_response_url(
        slack: FakeSlack, everything: ServerConfig) -> None:
    async with running_bridge(slack, {"everything": everything}) as bridge, with_web_forms(bridge) as server:
        with anyio.fail_after(patient(30)):
            await driver.mention(slack, CALL, "1800000000.000200")
            card = await driver.wait_card(slack, "1800000000.000200")
            slack.fail_next("chat.postEphemeral", "user_not_in_channel")
            await slack.send_envelope("interactive", block_actions(
                "U1", card.channel, card.ts, ids.WEB_FORM, card.interaction_id,
                block_id=f"{card.interaction_id}.act", response_url=slack.response_url))
            sent = await slack.wait_for_call("response_url")
            link = link_in(sent)
            assert sent.args["response_type"] == "ephemeral" and sent.args["replace_original"] is False
            assert link.startswith(f"http://127.0.0.1:{server.port}/form/")
            await driver.click(slack, card, ids.CANCEL)
            assert await driver.raw_result(slack, "1800000000.000200") == {"action": "cancel"}


async def test_without_web_forms_a_card_offers_no_web_button(slack: FakeSlack, everything: ServerConfig) -> None:
    async with running_bridge(slack, {"everything": everything}):
        with anyio.fail_after(patient(30)):
            await driver.mention(slack, CALL, "1800000000.000300")
            card = await driver.wait_card(slack, "1800000000.000300")
            assert ids.WEB_FORM not in card.actions()
            await driver.click(slack, card, ids.CANCEL)
            await driver.raw_result(slack, "1800000000.000300")
