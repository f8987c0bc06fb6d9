"""The console names the host a browser opens for a link that reads as another, with a plain warning, on both eras
and from a server inline and over stdio; server text in cards and results reaches it without a stray zero-width
joiner (an emoji sequence keeps its joiners)."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator, Sequence

import anyio
import pytest

from adapters.console import ConsoleAdapter
from bridge.host import Host
from tests.adapters.console.test_connect import Screen
from tests.harness.hosts import config_for, host_store, patient
from tests.servers import links
from tests.servers.links import FAMILY, TRICKS

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]


async def lines(items: Sequence[str]) -> AsyncIterator[str]:
    for item in items:
        yield item


@pytest.mark.parametrize("transport", ["inline", "stdio"])
@pytest.mark.parametrize("protocol", ["legacy", "auto"])
async def test_a_link_that_reads_as_another_host_is_shown_with_the_host_a_browser_opens(protocol: str,
                                                                                        transport: str) -> None:
    config = config_for({"links": links.config(transport)}, server_protocol=protocol)
    out = Screen()

    async def script() -> AsyncIterator[str]:
        # Each call's result before the next line: a 2026 call goes on after its card in a task of its own, so a
        # script that ran on would end the console (and the host) while the last declines were still on their way.
        for done, (url, _, _) in enumerate(TRICKS, start=1):
            yield f"!mcp call links visit {json.dumps({'url': url})}"
            yield "decline"
            while out.getvalue().count('"action": "decline"') < done:
                await out.changed.wait()
        yield "!mcp call links joined"

    host = Host(config, await host_store(config))
    async with host:
        console = ConsoleAdapter(host, script(), out)
        host.attach(console)
        with anyio.fail_after(patient(60)):
            await console.serve()
    text = out.getvalue()
    for _, opened, seeming in TRICKS:
        assert f"│ Host: {opened} (a browser opens this host, not {seeming} as written" in text
        assert f"│ ⚠ Careful: in a browser this link opens {opened}. Do not open it unless you are sure." in text
    assert text.count('"action": "decline"') == len(TRICKS)
    assert f"│ Sign in to continue: paypal says hi {FAMILY}" in text  # in the card
    assert f"links.joined:\npaypal says hi {FAMILY}" in text  # in a result
    assert text.count("\u200d") == 2 * (len(TRICKS) + 1)  # the family's two joiners, nothing else


async def test_a_result_reaches_the_console_without_a_stray_joiner() -> None:
    config = config_for({"links": links.config("inline")})
    out = io.StringIO()
    host = Host(config, await host_store(config))
    async with host:
        console = ConsoleAdapter(host, lines(["!mcp call links joined"]), out)
        host.attach(console)
        with anyio.fail_after(patient(60)):
            await console.serve()
    assert out.getvalue() == f"links.joined:\npaypal says hi {FAMILY}\n"
