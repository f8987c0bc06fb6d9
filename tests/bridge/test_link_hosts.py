"""A URL card names the host a browser opens, on both eras, from a real server inline and over stdio: the card's
host line, and `show`. (Issue 21: `https://evil.example\\@good.example/login` was shown as going to good.example.)"""

from __future__ import annotations

import json

import anyio
import pytest

from bridge.door.model import DecisionIn, Kind, MessageIn
from tests.harness.hosts import ALICE, ROOM, FakeChatPort, config_for, host_for, patient
from tests.servers import links
from tests.servers.links import TRICKS

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

ERAS = {"legacy": "2025-11-25", "auto": "2026-07-28"}


async def nth_result(chat: FakeChatPort, n: int) -> str:
    """The n-th result of `visit` posted in the conversation (each call posts one)."""
    return await chat.wait_for(lambda: next(iter(
        [m.text for m in chat.messages if m.text.startswith("links.visit:")][n:]), None))


@pytest.mark.parametrize("transport", ["inline", "stdio"])
@pytest.mark.parametrize("protocol", list(ERAS))
async def test_a_url_card_and_show_name_the_host_a_browser_opens(protocol: str, transport: str) -> None:
    host, chat = await host_for(config_for({"links": links.config(transport)}, server_protocol=protocol))
    async with host:
        for n, (url, opened, seeming) in enumerate(TRICKS):
            await host.handle_message(MessageIn(ROOM, ALICE, f"call links visit {json.dumps({'url': url})}",
                                                explicit_command=True))
            with anyio.fail_after(patient(60)):
                card = await chat.wait_card("url", n)
                await host.run_message(MessageIn(ROOM, ALICE, f"show {card.id}", explicit_command=True))
                shown = await chat.wait_message(f"[id {card.id}")
                await host.decide(DecisionIn(card.id, ALICE, "decline"))
                result = await nth_result(chat, n)
            assert card.kind is Kind.URL and card.url == url
            host_line = {d.label: d.text for d in card.details}["Host"]
            assert host_line.startswith(f"{opened} (a browser opens this host, not {seeming} as written")
            assert f"\nHost: {host_line}" in shown
            assert f'"era": "{ERAS[protocol]}"' in result and '"action": "decline"' in result
