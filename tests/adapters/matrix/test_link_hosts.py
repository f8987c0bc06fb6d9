"""A link card in a real Synapse names the host a browser opens, with a plain warning, on both eras; server text
reaches the room without a stray zero-width joiner."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import pytest

from adapters.matrix.render import DECLINE
from bridge.config.file import Config
from tests.adapters.matrix.harness import ada_with_the_bot, body, part
from tests.harness.synapse import Synapse
from tests.servers import links
from tests.servers.links import FAMILY, TRICKS

pytestmark = pytest.mark.anyio

ERAS = {"legacy": "2025-11-25", "auto": "2026-07-28"}


def visit_result(after: int) -> Callable[[int, Any], bool]:
    return lambda i, e: i >= after and body(e).startswith("links.visit") and "decline" in body(e)


@pytest.mark.parametrize("protocol", ["legacy", "auto"])
async def test_a_link_that_reads_as_another_host_is_shown_with_the_host_a_browser_opens(
        synapse: Synapse, tmp_path: Path, protocol: Literal["legacy", "auto"]) -> None:
    server = dataclasses.replace(links.config("inline"), protocol=protocol)
    config = Config(servers={"links": server}, store=str(tmp_path / "bridge.db"))
    async with ada_with_the_bot(synapse, tmp_path, config) as (ada, _, _):
        for url, opened, seeming in TRICKS:
            start = len(ada.seen)
            await ada.say(f"!mcp call links visit {json.dumps({'url': url})}")
            card = await ada.wait(part("card", after=start))
            await ada.react(card.event_id, DECLINE)
            result = await ada.wait(visit_result(start))
            text = body(card)
            assert f"It goes to: {opened} (a browser opens this host, not {seeming} as written" in text
            assert f"⚠ Careful: in a browser this link opens {opened}. Do not open it unless you are sure." in text
            assert f"paypal says hi {FAMILY}" in text  # the stray joiner is gone, the family's stay
            assert ERAS[protocol] in body(result)

