"""Company sign-in on Matrix (a real Synapse; the test's company identity provider and two protected MCP servers that
take its ID-JAGs; the bridge's HTTP server receiving the redirect): in a room of four, each person is asked once, in a
direct message, to sign in with the company, and then uses both servers as themselves with no prompt for the second;
someone the company has not assigned is told plainly in the room; no token reaches the room, a DM or the token file
in the clear."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from nio import InviteMemberEvent

from bridge.config.file import Config, HttpConfig
from tests.adapters.matrix.harness import Person, body, bridge, mark, matrix_block, person, register
from tests.harness.synapse import Synapse
from tests.servers.enterprise import Company, company
from tests.servers.signin import redirects, sign_in

pytestmark = pytest.mark.anyio

LINK = re.compile(r"https?://\S+/authorize\?\S+")


@pytest.fixture
def acme(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Company]:
    with company(tmp_path, monkeypatch) as c:
        yield c


def in_room(who: Person, event: Any, room: str) -> bool:
    return who.room_of.get(getattr(event, "event_id", "") or "") == room


def says(*parts: str) -> Callable[[int, Any], bool]:
    return lambda i, e: all(p in body(e) for p in parts)


async def sign_in_link(who: Person, room: str) -> tuple[str, str]:
    """The Connect link the bridge sent `who` in a direct message (joined on its invite), and that DM."""
    await who.wait(lambda i, e: isinstance(e, InviteMemberEvent) and e.state_key == who.user_id
                   and any(r != room for r in who.client.invited_rooms))
    [dm] = [r for r in who.client.invited_rooms if r != room]
    await who.client.join(dm)
    card = await who.wait(lambda i, e: in_room(who, e, dm) and mark(e).get("part") == "card")
    link = LINK.search(body(card))
    assert link is not None and "Connect Acme SSO" in body(card), body(card)
    return link.group(0), dm


async def test_each_person_signs_in_once_in_a_dm_and_uses_both_servers_as_themselves(
        synapse: Synapse, tmp_path: Path, acme: Company) -> None:
    bot = register(synapse, "bot")
    config = Config(servers=acme.server_configs(), store=str(tmp_path / "bridge.db"),
                    http=HttpConfig(listen="127.0.0.1:0"), **acme.settings())
    async with person(synapse, "ada", None) as ada, person(synapse, "bob", None) as bob, \
            person(synapse, "cy", None) as cy, \
            bridge(config, matrix_block(synapse, bot, tmp_path / "bot"), tmp_path / "bridge.db") as running, \
            redirects(running.host):
        room = await ada.create_room([bot.user_id, bob.user_id, cy.user_id], encrypted=False)
        await ada.wait_joined(bot.user_id)
        await bob.join(room)
        await cy.join(room)
        seen: dict[str, str] = {}
        for who, user in ((ada, "ada"), (bob, "bob")):
            await who.say("!mcp call crm whoami")
            link, seen[user] = await sign_in_link(who, room)
            await sign_in(link, user)
            await who.wait(says("crm.whoami", f"{user}@example.com"))
            await who.say("!mcp call wiki whoami")
            await who.wait(says("wiki.whoami", f"{user}@example.com"))
        await cy.say("!mcp call wiki whoami")
        link, _ = await sign_in_link(cy, room)
        refused = await sign_in(link, "cy")
        told = await cy.wait(lambda i, e: in_room(cy, e, room) and "refused the sign-in to Acme SSO" in body(e))
        everything = [body(e) for who in (ada, bob, cy) for e in who.seen]
    assert refused.status == 400 and "not assigned" in body(told)
    # One prompt each (the second server asked nobody), and never in the room: only in each person's DM.
    assert acme.idp.counts["authorize"] == 3 and acme.idp.counts["exchange"] == 4
    assert all(p.counts["authorize"] == 0 for p in acme.servers.values())
    assert sum("Connect Acme SSO" in text for who in (ada, bob) for text in [body(e) for e in who.seen]) == 2
    assert not any(LINK.search(body(e)) for who in (ada, bob, cy) for e in who.seen if in_room(who, e, room))
    assert acme.issued() and not any(token in text for token in acme.issued() for text in everything)
    stored = acme.tokens.read_bytes()
    assert not any(token.encode() in stored for token in acme.issued())
