"""Per-person accounts on Matrix (a real Synapse; the real protected MCP server and its authorization server; the
bridge's HTTP server receiving the redirect): the Connect prompt arrives in a direct message with the person, never
in the room, and once they sign in the call they made in the room completes as them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from nio import InviteMemberEvent

from bridge.config.file import Config
from tests.adapters.matrix.harness import Person, body, bridge, mark, matrix_block, person, register
from tests.harness.synapse import Synapse
from tests.servers.signin import Site, redirects, sign_in, site

pytestmark = pytest.mark.anyio

LINK = re.compile(r"https?://\S+/authorize\?\S+")


def in_room(who: Person, event: Any, room: str) -> bool:
    return who.room_of.get(getattr(event, "event_id", "") or "") == room


@pytest.fixture
def web(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    with site(tmp_path, monkeypatch) as s:
        yield s


async def test_the_connect_prompt_comes_in_a_dm_and_the_rooms_call_completes_as_that_person(
        synapse: Synapse, tmp_path: Path, web: Site) -> None:
    bot = register(synapse, "bot")
    config = Config(servers={"s": web.server()}, store=str(tmp_path / "bridge.db"),
                    **web.settings())
    async with person(synapse, "ada", None) as ada, person(synapse, "bob", None) as bob, \
            bridge(config, matrix_block(synapse, bot, tmp_path / "bot"), tmp_path / "bridge.db") as running, \
            redirects(running.host):
        room = await ada.create_room([bot.user_id, bob.user_id], encrypted=False)  # a room of three: not a DM
        await ada.wait_joined(bot.user_id)
        await bob.join(room)
        await ada.say("!mcp call s whoami")
        await ada.wait(lambda i, e: isinstance(e, InviteMemberEvent) and e.state_key == ada.user_id)
        [dm] = [r for r in ada.client.invited_rooms if r != room]
        await ada.client.join(dm)
        card = await ada.wait(lambda i, e: in_room(ada, e, dm) and mark(e).get("part") == "card")
        told = await ada.wait(lambda i, e: in_room(ada, e, room) and "private prompt" in body(e))
        link = LINK.search(body(card))
        assert link is not None, body(card)
        visit = await sign_in(link.group(0), "ada")
        done = await ada.wait(lambda i, e: in_room(ada, e, room) and "for ada" in body(e))
        seen_in_room = [body(e) for e in ada.seen if in_room(ada, e, room)]
        await bob.wait(lambda i, e: "for ada" in body(e))
        bob_saw = [body(e) for e in bob.seen]
        remembered = await running.store.adapter_value("matrix", f"direct:{ada.user_id}")
    assert visit.status == 200
    assert "Connect s" in body(card) and "It goes to: 127.0.0.1" in body(card)
    assert "in a direct message" in body(told) and body(done).startswith("s.whoami:")
    assert not any(LINK.search(text) for text in seen_in_room + bob_saw)
    assert remembered == dm
