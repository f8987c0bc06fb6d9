"""A link card in Slack names the host a browser opens, through the fake Slack over real HTTP and a real server
(inline and over stdio) on both eras: no Open button, and a plain warning naming that host. Server text reaches the
card without a stray zero-width joiner."""

from __future__ import annotations

import json
from collections.abc import Callable

import anyio
import pytest

from adapters.slack import ids
from tests.adapters.slack import driver
from tests.adapters.slack.conftest import running_bridge
from tests.harness.hosts import patient
from tests.harness.slack import Call, FakeSlack
from tests.servers import links
from tests.servers.links import FAMILY, TRICKS

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

ERAS = {"legacy": "2025-11-25", "auto": "2026-07-28"}


def visit_result(thread: str) -> Callable[[Call], bool]:
    return lambda c: c.args.get("thread_ts") == thread and "links.visit" in str(c.args.get("text"))


@pytest.mark.parametrize("transport", ["inline", "stdio"])
@pytest.mark.parametrize("protocol", ["legacy", "auto"])
async def test_a_link_that_reads_as_another_host_gets_no_button_and_a_warning_naming_the_real_one(
        slack: FakeSlack, protocol: str, transport: str) -> None:
    async with running_bridge(slack, {"links": links.config(transport)}, server_protocol=protocol):
        for n, (url, opened, seeming) in enumerate(TRICKS):
            thread = f"18000000{n:02d}.000100"
            with anyio.fail_after(patient(60)):
                await driver.mention(slack, f"call links visit {json.dumps({'url': url})}", thread)
                card = await driver.wait_card(slack, thread)
                await driver.click(slack, card, ids.DECLINE)
                result = await slack.wait_for_call("chat.postMessage", visit_result(thread))
            text = json.dumps(card.blocks, ensure_ascii=False)
            warning = f"No *Open link* button: the host {opened} (a browser opens this host, not {seeming} as written"
            assert ids.OPEN_URL not in card.actions() and warning in text
            assert f"*Host:* {opened} (a browser opens this host" in text
            assert f"paypal says hi {FAMILY}" in text  # the stray joiner is gone, the family's stay
            assert "decline" in result.args["text"] and ERAS[protocol] in result.args["text"]


async def test_a_plain_link_gets_a_button_with_the_url_a_browser_opens(slack: FakeSlack) -> None:
    async with running_bridge(slack, {"links": links.config("inline")}, server_protocol="auto"):
        with anyio.fail_after(patient(60)):
            url = "HTTPS://Example.COM:443/caf\u00e9?q=1"
            await driver.mention(slack, f"call links visit {json.dumps({'url': url})}", "1800000100.000100")
            card = await driver.wait_card(slack, "1800000100.000100")
            await driver.click(slack, card, ids.DECLINE)
    button = next(e for b in card.blocks if b["type"] == "actions" for e in b["elements"]
                  if e["action_id"] == ids.OPEN_URL)
    assert button["url"] == "https://example.com/caf%C3%A9?q=1"
