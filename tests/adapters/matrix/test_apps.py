"""MCP Apps from Matrix, against a real Synapse: under a result whose tool has an app, the requester's own link comes
to them in a direct message, never in the room; the room is told where it went, and anyone else there reacts 📱 for
a link of their own. Debian's Chromium runs the app from it on a phone-sized screen. The app's call of a tool that
needs approval posts an approval card in the room and goes on only once it is approved; another person's browser is
refused the link. Screenshots: .cache/artifacts/apps/matrix-*.png.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from nio import InviteMemberEvent
from playwright.async_api import Browser

from adapters.matrix.render import ACCEPT
from bridge.config.file import Config
from tests.adapters.matrix.harness import Person, body, bridge, content, matrix_block, part, person, register
from tests.adapters.matrix.test_web_links import join_invited
from tests.apps import browsing
from tests.apps.servers import app_server, gated
from tests.harness.synapse import Synapse
from tests.webform import test_browser as web

pytestmark = pytest.mark.anyio

browser = web.browser
LINK = re.compile(r"http://127\.0\.0\.1:\d+/app/[A-Za-z0-9_.\-]+")
TIME = re.compile(r"\d{4}-\d\d-\d\dT[\d:.]+Z")


async def join_dm(p: Person, room: str) -> str:
    """Join the direct message the bot invited `p` to (not `room`, where `p` was invited before)."""
    await p.wait(lambda i, e: isinstance(e, InviteMemberEvent) and e.state_key == p.user_id
                 and str(e.source.get("room_id", "")) != room and any(r != room for r in p.client.invited_rooms))
    dm = next(str(r) for r in p.client.invited_rooms if r != room)
    await p.client.join(dm)
    return dm


def in_room(p: Person, event: object, room: str) -> bool:
    return p.room_of.get(getattr(event, "event_id", "")) == room


def link_in_dm(p: Person, dm: str, after: int) -> str:
    found = [LINK.search(body(e)) for i, e in enumerate(p.seen) if i >= after and in_room(p, e, dm)]
    links = [m.group(0) for m in found if m is not None]
    assert links, "no link in the direct message"
    return links[-1]


async def test_apps_open_from_a_link_sent_by_direct_message_and_a_gated_call_waits_for_approval_in_the_room(
        synapse: Synapse, tmp_path: Path, browser: Browser) -> None:
    bot = register(synapse, "bot")
    basic = gated(app_server("basic", "server-basic-vanillajs"), "get-time")
    monitor = app_server("monitor", "server-system-monitor")
    config = Config(servers={"basic": basic, "monitor": monitor}, store=str(tmp_path / "bridge.db"))
    async with person(synapse, "ada", None) as ada, person(synapse, "grace", None) as grace, \
            bridge(config, matrix_block(synapse, bot, tmp_path / "bot"), tmp_path / "bridge.db") as running, \
            browsing.serving_apps(running.host):
        room = await ada.create_room([bot.user_id, grace.user_id], encrypted=False)
        await ada.wait_joined(bot.user_id)
        await grace.join(room)
        await ada.say("!mcp help")
        await ada.wait(lambda i, e: body(e).startswith("Commands"))

        await ada.say("!mcp call basic get-time")
        card = await ada.wait(part("card"))
        await ada.react(card.event_id, ACCEPT)
        result = await ada.wait(lambda i, e: body(e).startswith("basic.get-time:"))
        first = TIME.search(body(result)).group(0)  # type: ignore[union-attr]
        dm = await join_invited(ada)
        assert dm != room
        told = await ada.wait(lambda i, e: "your own link is in our direct messages" in body(e))
        assert ada.room_of[told.event_id] == room and "react 📱 to this message" in body(told)
        await ada.wait(lambda i, e: in_room(ada, e, dm) and LINK.search(body(e)) is not None)
        url = link_in_dm(ada, dm, 0)
        assert not [e for e in ada.seen if in_room(ada, e, room) and "/app/" in str(content(e))]

        page, said = await browsing.open_app(browser, url)
        app = browsing.inside(page)
        await app.locator("#server-time", has_text=first).wait_for()
        await browsing.said_in(page, said, "Received tool call input:")
        await page.screenshot(path=browsing.artifacts() / "matrix-basic.png", full_page=True)

        # The app's own call needs approval: a card in the room, the app waits, an approval lets it go on.
        seen = len(ada.seen)
        await browsing.settled(page)
        await browsing.tap(app, "Get Server Time")
        gate = await ada.wait(part("card", after=seen))
        assert ada.room_of[gate.event_id] == room
        assert await app.locator("#server-time").inner_text() == first
        await ada.react(gate.event_id, ACCEPT)
        await app.locator("#server-time", has_text=re.compile(r"^(?!" + re.escape(first) + r")\d{4}-")).wait_for()

        # grace's browser is refused ada's link; she reacts 📱 and gets her own, in her own direct message.
        stranger = await (await browser.new_context(**web.PHONE)).new_page()
        refused = await stranger.goto(url)
        assert refused is not None and refused.status == 403
        await grace.react(told.event_id, "📱")
        grace_dm = await join_dm(grace, room)
        await grace.wait(lambda i, e: in_room(grace, e, grace_dm) and LINK.search(body(e)) is not None)
        own = link_in_dm(grace, grace_dm, 0)
        assert own != url
        theirs, _ = await browsing.open_app(browser, own)
        await browsing.inside(theirs).locator("#server-time", has_text=first).wait_for()
        await page.get_by_role("button", name="Close the app").click()
        await browsing.said_in(page, said, "App is being torn down")

        # The richer app: the system monitor, from a second link in the same direct message.
        seen = len(ada.seen)
        await ada.say("!mcp call monitor get-system-info")
        info = await ada.wait(lambda i, e: i >= seen and body(e).startswith("monitor.get-system-info:"))
        hostname = re.search(r'"hostname":\s*"([^"]+)"', body(info)).group(1)  # type: ignore[union-attr]
        await ada.wait(lambda i, e: i >= seen and in_room(ada, e, dm) and LINK.search(body(e)) is not None)
        page, _ = await browsing.open_app(browser, link_in_dm(ada, dm, seen))
        app = browsing.inside(page)
        await app.locator("#info-hostname", has_text=hostname).wait_for()
        await app.locator("#memory-percent", has_text=re.compile(r"^\d+%$")).wait_for()
        await page.screenshot(path=browsing.artifacts() / "matrix-system-monitor.png", full_page=True)
        assert not [e for e in grace.seen if in_room(grace, e, room) and "/app/" in str(content(e))]
