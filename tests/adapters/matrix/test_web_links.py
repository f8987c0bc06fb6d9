"""Fill in on the web from Matrix, against a real Synapse: the form card says how to get a link; a person who may
answer reacts 🌐 (or replies !web) and gets their own one-time link in a direct message, never in the card's room;
Debian's Chromium fills server-everything's form with it, and the card in the room shows it accepted. Someone who may
not answer gets the usual public refusal and no link.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from nio import InviteMemberEvent
from playwright.async_api import Browser

from adapters.matrix.formtext import WEB
from bridge.config.file import Config
from bridge.web.forms import WebForms
from bridge.web.server import HttpServer
from tests.adapters.matrix.harness import (
    Bridge,
    Person,
    body,
    bridge,
    content,
    edit_of,
    everything,
    mark,
    matrix_block,
    part,
    person,
    raw_result,
    register,
)
from tests.harness.synapse import Synapse
from tests.webform import test_browser as web

pytestmark = pytest.mark.anyio

browser = web.browser  # Debian's Chromium through Playwright (the web form tests' fixture)

LINK = re.compile(r"http://127\.0\.0\.1:\d+/form/[A-Za-z0-9_.\-]+")


@asynccontextmanager
async def with_web_forms(running: Bridge) -> AsyncIterator[HttpServer]:
    """The bridge's HTTP server on a free loopback port with the web-form routes, offered to the cards (as
    `bridge.cli` does when `http.listen` and `http.public_url` are set)."""
    server = HttpServer("127.0.0.1:0")
    running.host.offer_web_forms(WebForms(running.host, server))
    async with anyio.create_task_group() as tg:
        await tg.start(server.serve)
        yield server
        tg.cancel_scope.cancel()


async def join_invited(p: Person) -> str:
    """Join the room the bot invited `p` to (its direct message), keeping `p`'s room for what they send."""
    await p.wait(lambda i, e: isinstance(e, InviteMemberEvent) and e.state_key == p.user_id)
    [dm] = list(p.client.invited_rooms)
    await p.client.join(dm)
    return str(dm)


async def test_a_reaction_brings_a_private_link_in_a_dm_and_a_browser_answer_finishes_the_card(
        synapse: Synapse, tmp_path: Path, browser: Browser) -> None:
    bot = register(synapse, "bot")
    config = Config(servers={"everything": everything()}, store=str(tmp_path / "bridge.db"))
    async with person(synapse, "ada", None) as ada, person(synapse, "grace", None) as grace, \
            bridge(config, matrix_block(synapse, bot, tmp_path / "bot"), tmp_path / "bridge.db") as running, \
            with_web_forms(running):
        room = await ada.create_room([bot.user_id, grace.user_id], encrypted=False)
        await ada.wait_joined(bot.user_id)
        await grace.join(room)
        await ada.say("!mcp help")  # a round trip: the bot's sync has seen everyone join
        await ada.wait(lambda i, e: body(e).startswith("Commands"))

        await ada.say("!mcp call everything trigger-elicitation-request")
        card = await ada.wait(part("card"))
        assert f"{WEB} Or fill it in on the web: react {WEB} to this message (or reply !web)" in body(card)
        assert "/form/" not in body(card)

        # Someone who may not answer: the usual public refusal, and no link.
        await grace.react(card.event_id, WEB)
        refusal = await ada.wait(lambda i, e: "can answer this request" in body(e) and grace.user_id in
                                 str(content(e).get("m.mentions", {})))
        assert ada.room_of[refusal.event_id] == room

        await ada.react(card.event_id, WEB)
        dm = await join_invited(ada)
        assert dm != room
        sent = await ada.wait(lambda i, e: LINK.search(body(e)) is not None)
        assert ada.room_of[sent.event_id] == dm  # in the direct message, not in the card's room
        match = LINK.search(body(sent))
        assert match is not None
        link = match.group(0)
        assert not [e for e in ada.seen if ada.room_of.get(getattr(e, "event_id", "")) == room and
                    "/form/" in str(content(e))]

        page = await web.phone_page(browser)
        opened = await page.goto(link)
        assert opened is not None and opened.status == 200
        await web.fill_everything(page, email="ada@example.com")
        assert (await web.press(page, "Submit")).status == 200
        assert await page.get_by_role("heading").inner_text() == "Thanks — sent"
        result = await ada.wait(lambda i, e: "Raw result:" in body(e))
        assert raw_result(body(result)) == {"action": "accept", "content": web.EVERYTHING_ANSWER}
        await ada.wait(lambda i, e: edit_of(card.event_id)(i, e) and
                       "accepted by" in str(content(e)["m.new_content"]["body"]).lower())
        await grace.wait(lambda i, e: "Raw result:" in body(e))
        assert not [e for e in grace.seen if "/form/" in str(content(e))]  # grace never saw a link


async def test_a_reply_asks_for_the_link_and_without_web_forms_the_card_offers_none(
        synapse: Synapse, tmp_path: Path) -> None:
    bot = register(synapse, "bot")
    config = Config(servers={"everything": everything()}, store=str(tmp_path / "bridge.db"))
    async with person(synapse, "ada", None) as ada, \
            bridge(config, matrix_block(synapse, bot, tmp_path / "bot"), tmp_path / "bridge.db") as running:
        room = await ada.create_room([bot.user_id], encrypted=False)
        await ada.wait_joined(bot.user_id)
        command = await ada.say("!mcp call everything trigger-elicitation-request")
        plain_card = await ada.wait(part("card"))
        assert WEB not in body(plain_card)
        await ada.say("!cancel", thread=command)
        await ada.wait(lambda i, e: "Raw result:" in body(e))

        async with with_web_forms(running):
            after = len(ada.seen)
            command = await ada.say("!mcp call everything trigger-elicitation-request")
            card = await ada.wait(part("card", after=after))
            assert mark(card)["interaction"] != mark(plain_card)["interaction"]
            await ada.say("!web", thread=command, latest=card.event_id)
            dm = await join_invited(ada)
            sent = await ada.wait(lambda i, e: LINK.search(body(e)) is not None)
            assert ada.room_of[sent.event_id] == dm != room
            await ada.say("!cancel", thread=command)
            result = await ada.wait(lambda i, e: i >= after and "Raw result:" in body(e))
    assert raw_result(body(result)) == {"action": "cancel"}
