"""A terminal's cards end with its process: a console card decided just before the process ended is not shown final
again at the next start (the `└─ … accepted by you` line a newcomer saw after Ctrl-C and Ctrl-D), on both engines.

`mark_shown` is written behind, so a process that ends right after showing a card final may leave it unmarked; a
chat card is then shown final again by the next worker (its edit may not have happened), a console card is not.
"""

from __future__ import annotations

import dataclasses
import time

import pytest

from bridge.door.model import CardRef, ConversationKey
from bridge.storage import open_store
from tests.storage.support import accepted, interaction, pending, worker

pytestmark = pytest.mark.anyio


async def test_a_decided_console_card_is_not_shown_again_at_the_next_start(target: str) -> None:
    console = dataclasses.replace(interaction(), id="c1", conversation=ConversationKey("console", "local", "tty"))
    chat = interaction()
    first = await open_store(target, worker_id="w1")
    try:
        await first.save_pending_call(pending("p1"))
        for item in (console, chat):
            await first.save_interaction(item, pending_call="p1", input_key="k")
            await first.set_card(item.id, CardRef(item.id, {"ts": "1"}))
            assert await first.claim(item, accepted())
    finally:
        await first.aclose()  # ended before either card was marked shown
    async with worker(target, "w2") as second:
        await second.forget_cards("console")
        reaped = await second.reap_workers(now=time.time() + 3600)
    assert [s.interaction.id for s in reaped.decided] == [chat.id]
