"""MCP Apps from Slack: the real adapter against the fake Slack, the bridge's HTTP server with the app pages, the
example app servers over stdio, and Debian's Chromium on a phone-sized screen.

The message under the result is public, so it carries no link: a press on Open makes one for the presser, sent to
them alone. The app's call of a tool that needs approval posts an approval card in the thread and goes on only once
it is approved. Screenshots: .cache/artifacts/apps/slack-*.png.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import anyio
import pytest
from playwright.async_api import Browser

from adapters.slack import ids
from bridge.config.file import ServerConfig
from tests.adapters.slack.conftest import running_bridge
from tests.apps import browsing, servers
from tests.apps.servers import gated
from tests.harness.hosts import patient
from tests.harness.slack import Call, FakeSlack, block_actions, event_app_mention
from tests.webform import test_browser as web

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

browser = web.browser
basic, monitor = servers.basic, servers.monitor  # the example app servers (fixtures)
LINK = re.compile(r"<(http://127\.0\.0\.1:\d+/app/[A-Za-z0-9_.\-]+)\|Open the app>")


def has_action(call: Call, action_id: str, thread: str) -> bool:
    return call.args.get("thread_ts") == thread and action_id in json.dumps(call.args.get("blocks") or [])


async def nth_call(slack: FakeSlack, method: str, predicate: Callable[[Call], bool], n: int) -> Call:
    """The `n`th (from 0) call to `method` matching `predicate`, waiting for it."""
    matching: set[int] = set()

    def counted(call: Call) -> bool:
        if predicate(call):
            matching.add(id(call))
        return len(matching) > n

    return await slack.wait_for_call(method, counted)


async def approve_next(slack: FakeSlack, thread: str, seen: int) -> None:
    """Approve the `seen`+1th approval card of the thread, as U1."""
    card = await nth_call(slack, "chat.postMessage", lambda c: has_action(c, ids.ACCEPT, thread), seen)
    actions = next(b for b in card.args["blocks"] if b["type"] == "actions")
    interaction = actions["elements"][0]["value"]
    await slack.send_envelope("interactive", block_actions("U1", card.response["channel"], card.response["ts"],
                                                           ids.ACCEPT, interaction, block_id=actions["block_id"]))


async def open_link(slack: FakeSlack, thread: str, user: str) -> str:
    """Press Open under the thread's latest app message as `user`; the link they are sent privately."""
    await slack.wait_for_call("chat.postMessage", lambda c: has_action(c, ids.OPEN_APP, thread))
    offer = [c for c in slack.calls_to("chat.postMessage") if has_action(c, ids.OPEN_APP, thread)][-1]
    assert "/app/" not in json.dumps(offer.args)  # the public message carries no link
    actions = next(b for b in offer.args["blocks"] if b["type"] == "actions")
    before = len([c for c in slack.calls_to("chat.postEphemeral") if c.args["user"] == user])
    await slack.send_envelope("interactive", block_actions(
        user, offer.response["channel"], offer.response["ts"], ids.OPEN_APP, actions["elements"][0]["value"],
        block_id=actions["block_id"], message={"type": "message", "ts": offer.response["ts"], "thread_ts": thread}))
    private = await nth_call(slack, "chat.postEphemeral", lambda c: c.args["user"] == user, before)
    assert private.args["thread_ts"] == thread
    match = LINK.search(str(private.args["text"]))
    assert match, private.args
    return match.group(1)


async def test_the_basic_app_opens_from_a_private_link_and_its_gated_call_waits_for_approval_in_the_thread(
        slack: FakeSlack, basic: ServerConfig, browser: Browser) -> None:
    thread = "1800000000.000100"
    async with running_bridge(slack, {"basic": gated(basic, "get-time")}) as bridge, browsing.serving_apps(bridge.host):
        with anyio.fail_after(patient(90)):
            await slack.send_envelope("events_api", event_app_mention("U1", "C1", "<@UBOT> call basic get-time",
                                                                      thread))
            await approve_next(slack, thread, 0)
            result = await slack.wait_for_call("chat.postMessage", lambda c: c.args.get("thread_ts") == thread
                                               and "basic.get-time" in str(c.args.get("text")) and "Z" in
                                               str(c.args.get("text")))
            first = re.search(r"\d{4}-\d\d-\d\dT[\d:.]+Z", str(result.args["text"])).group(0)  # type: ignore[union-attr]
            url = await open_link(slack, thread, "U1")
            page, said = await browsing.open_app(browser, url)
            app = browsing.inside(page)
            await app.locator("#server-time", has_text=first).wait_for()
            await browsing.said_in(page, said, "Received tool call input:")
            await page.screenshot(path=browsing.artifacts() / "slack-basic.png", full_page=True)

            await browsing.settled(page)
            await browsing.tap(app, "Get Server Time")
            await nth_call(slack, "chat.postMessage", lambda c: has_action(c, ids.ACCEPT, thread), 1)
            assert await app.locator("#server-time").inner_text() == first  # the app waits for the approval
            await approve_next(slack, thread, 1)
            await app.locator("#server-time", has_text=re.compile(r"^(?!" + re.escape(first) + r")\d{4}-")).wait_for()

            # Someone else presses Open: a link of their own; the first person's link is refused in their browser.
            other = await open_link(slack, thread, "U2")
            assert other != url
            stranger = await (await browser.new_context(**web.PHONE)).new_page()
            refused = await stranger.goto(url)
            assert refused is not None and refused.status == 403
            await page.get_by_role("button", name="Close the app").click()
            await browsing.said_in(page, said, "App is being torn down")


async def test_the_system_monitor_renders_from_slack(slack: FakeSlack, monitor: ServerConfig,
                                                     browser: Browser) -> None:
    thread = "1800000000.000200"
    async with running_bridge(slack, {"monitor": monitor}) as bridge, browsing.serving_apps(bridge.host):
        with anyio.fail_after(patient(90)):
            mention = event_app_mention("U1", "C1", "<@UBOT> call monitor get-system-info", thread)
            await slack.send_envelope("events_api", mention)
            result = await slack.wait_for_call("chat.postMessage", lambda c: c.args.get("thread_ts") == thread
                                               and "hostname" in str(c.args.get("text")))
            hostname = re.search(r'"hostname":\s*"([^"]+)"', str(result.args["text"])).group(1)  # type: ignore[union-attr]
            url = await open_link(slack, thread, "U1")
            page, _ = await browsing.open_app(browser, url)
            app = browsing.inside(page)
            await app.locator("#info-hostname", has_text=hostname).wait_for()
            await app.locator("#memory-percent", has_text=re.compile(r"^\d+%$")).wait_for()
            await page.screenshot(path=browsing.artifacts() / "slack-system-monitor.png", full_page=True)
