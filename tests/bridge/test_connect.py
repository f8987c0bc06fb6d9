"""Per-person accounts in chat, end to end through the core (a fake chat port; the real protected MCP server, its
authorization server, and the bridge's HTTP server receiving the redirects): a private Connect prompt to the person
whose call needs it, each person their own token and session in one shared conversation, a third person refused,
tampered and replayed `state` refused, an unknown person refused, a declined or expired prompt told, and `accounts`
and `logout`."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from anyio.abc import TaskGroup
from mcp.types import CallToolResult

from bridge.auth.tokens import VaultStorage
from bridge.config.file import Config, HttpConfig
from bridge.door.model import Actor, ConversationKey, DecisionIn, MessageIn, Verdict
from bridge.host import Host
from bridge.web.server import HttpServer
from tests.harness.hosts import FakeChatPort, host_for, patient
from tests.servers.signin import ADA, BOB, CHANNEL, CY, Site, get, open_card, redirects, sign_in, site, text

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

@pytest.fixture
def web(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    with site(tmp_path, monkeypatch) as s:
        yield s


@asynccontextmanager
async def bridge(web: Site, sign_in_time: float = 60.0) -> AsyncIterator[tuple[Host, FakeChatPort, HttpServer]]:
    config = Config(servers={"s": web.server(timeout=sign_in_time)}, store=":memory:", conversation_scope="channel",
                    http=HttpConfig(listen="127.0.0.1:0"), **web.settings())
    host, chat = await host_for(config)
    async with host, redirects(host) as http:
        yield host, chat, http


def start_whoami(tg: TaskGroup, host: Host, person: Actor) -> list[CallToolResult | None]:
    """The person's `whoami` call in the background; its result is in the list once the call ends."""
    results: list[CallToolResult | None] = []

    async def call() -> None:
        results.append(await host.calls.run(CHANNEL, person, "s", "whoami", {}))

    tg.start_soon(call)
    return results


async def test_two_people_in_one_channel_each_connect_and_use_their_own_account(
        web: Site, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    results: dict[str, CallToolResult | None] = {}
    async with bridge(web) as (host, chat, http):
        async def call(person: Actor) -> None:
            results[person.user_id] = await host.calls.run(CHANNEL, person, "s", "whoami", {})

        with anyio.fail_after(patient(30)):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call, ADA)
                tg.start_soon(call, BOB)
                ada_card, bob_card = await open_card(chat, ADA), await open_card(chat, BOB)
                ada_visit = await sign_in(ada_card.url, "ada")
                # The page says "signed in" only once the code was exchanged and her token kept.
                stored_at_page = await VaultStorage(host.accounts.clients.vault(host.config.servers["s"]), web.url,
                                                    ADA.key).get_tokens()
                await sign_in(bob_card.url, "bob")
            again = await host.calls.run(CHANNEL, ADA, "s", "whoami", {})  # her stored token: no new prompt
        sessions = sorted(s.key for s in host.pool.sessions())
    assert text(results["U-ada"]).endswith("for ada") and text(results["U-bob"]).endswith("for bob")
    assert text(again).endswith("for ada") and len(chat.cards) == 2
    assert sessions == [(CHANNEL.id(), "s", ADA.key), (CHANNEL.id(), "s", BOB.key)]
    for card, person in ((ada_card, ADA), (bob_card, BOB)):
        assert card.private and card.approvers == frozenset({person.key}) and card.origin == CHANNEL
        assert card.conversation == ConversationKey("test", "", f"DM-{person.user_id}")
        assert card.details[0].text == "127.0.0.1" and card.url.startswith(web.url.removesuffix("/mcp"))
        assert chat.finished[card.id].reason == "connected"
    assert ada_visit.status == 200 and "You are signed in to s." in ada_visit.page and stored_at_page is not None
    assert ada_visit.query["redirect_uri"] == http.url("/oauth/callback")
    room = [m.text for m in chat.messages if m.conversation == CHANNEL]
    assert any("Ada: s works with each person's own account" in m for m in room)
    assert not any("authorize" in m or "state=" in m for m in room)  # the link itself only in the DM
    # No token ever reaches chat or the logs (debug included), nor the token file in the clear.
    shown = "\n".join([m.text for m in chat.messages] + [repr(c) for c in chat.cards.values()] + [caplog.text])
    assert web.provider.issued and not any(token in shown for token in web.provider.issued)
    assert not any(token.encode() in web.tokens.read_bytes() for token in web.provider.issued)


async def test_a_third_persons_answer_is_refused_and_a_tampered_or_replayed_state_too(web: Site) -> None:
    async with bridge(web) as (host, chat, http):
        with anyio.fail_after(patient(30)):
            async with anyio.create_task_group() as tg:
                result = start_whoami(tg, host, ADA)
                card = await open_card(chat, ADA)
                refused = await host.decide(DecisionIn(card.id, CY, "decline"))
                state = card.url.split("state=", 1)[1].split("&", 1)[0]
                forged = await get(http.url(f"/oauth/callback?code=x&state={state}x"))
                visit = await sign_in(card.url, "ada")
            replayed = await get(visit.callback)
    assert refused.verdict is Verdict.REFUSED and "Only Ada can answer" in chat.notices[0][1]
    assert forged.status_code == 400 and "not one the bridge is waiting for" in forged.text
    assert visit.status == 200 and text(result[0]).endswith("for ada")
    assert replayed.status_code == 400 and "already used" in replayed.text


async def test_an_unknown_person_fails_closed(web: Site) -> None:
    async with bridge(web) as (host, chat, _):
        with anyio.fail_after(patient(30)):
            assert await host.calls.run(CHANNEL, None, "s", "whoami", {}) is None
            assert await host.calls.run(CHANNEL, Actor("test", ""), "s", "whoami", {}) is None
    assert [m.text for m in chat.messages] == [
        "s works with each person's own account, and this request comes from no known person, so it was not sent.",
    ] * 2
    assert chat.cards == {} and web.provider.counts["authorize"] == 0


async def test_a_declined_prompt_ends_the_call_and_an_expired_one_says_to_run_it_again(web: Site) -> None:
    async with bridge(web, sign_in_time=1.0) as (host, chat, _):
        with anyio.fail_after(patient(30)):
            async with anyio.create_task_group() as tg:
                tg.start_soon(host.calls.run, CHANNEL, ADA, "s", "whoami", {})
                card = await open_card(chat, ADA)
                await host.decide(DecisionIn(card.id, ADA, "decline"))
            declined = await chat.wait_message("did not connect")
            expired = await host.calls.run(CHANNEL, BOB, "s", "whoami", {})
            said = chat.messages[-1].text
    assert "Ada did not connect s: the prompt was declined by Ada" in declined
    assert expired is None and "Bob did not connect s within 1 s; run the call again for a new prompt." in said


async def test_accounts_lists_names_only_and_logout_forgets_and_revokes(web: Site) -> None:
    async with bridge(web) as (host, chat, _):
        async def command(person: Actor, line: str) -> str:
            before = len(chat.messages)
            await host.run_message(MessageIn(CHANNEL, person, line, explicit_command=True))
            return "\n".join(m.text for m in chat.messages[before:])

        with anyio.fail_after(patient(30)):
            assert "You have not connected" in await command(ADA, "accounts")
            async with anyio.create_task_group() as tg:
                tg.start_soon(command, ADA, "call s whoami")
                await sign_in((await open_card(chat, ADA)).url, "ada")
            listed = await command(ADA, "accounts")
            bobs = await command(BOB, "accounts")
            issued = list(web.provider.issued)
            out = await command(ADA, "logout s")
            again = await command(ADA, "logout s")
            async with anyio.create_task_group() as tg:  # the next call asks her to connect again
                tg.start_soon(command, ADA, "call s whoami")
                second = await open_card(chat, ADA)
                await sign_in(second.url, "ada")
    assert listed == "Your connected accounts: s." and "You have not connected" in bobs
    assert not any(token in listed + out for token in issued)
    assert out == "Disconnected s: your sign-in was forgotten and revoked at the server."
    assert again == "You were not connected to s; nothing was kept."
    assert set(web.provider.revoked) == set(issued)
    assert web.provider.counts["authorize"] == 2


async def test_an_expired_token_is_refreshed_quietly_and_a_revoked_refresh_token_asks_again(web: Site) -> None:
    async with bridge(web) as (host, chat, _):
        server = host.config.servers["s"]

        async def time_passes() -> None:
            """Her access token expires (as the bridge's vault and the authorization server see it), and the bridge
            forgets what it held in memory, as after a restart."""
            storage = VaultStorage(host.accounts.clients.vault(server), web.url, ADA.key)
            token = await storage.get_tokens()
            assert token is not None
            token.expires_in = -60
            await storage.set_tokens(token)
            web.provider.expire_access_tokens()
            host.accounts.clients.forget(server, ADA.key)
            await host.pool.close_person("s", ADA)

        results: list[CallToolResult | None] = []

        async def call() -> None:
            results.append(await host.calls.run(CHANNEL, ADA, "s", "whoami", {}))

        with anyio.fail_after(patient(30)):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await sign_in((await open_card(chat, ADA)).url, "ada")
            await time_passes()
            await call()
            cards_after_refresh = len(chat.cards)
            web.provider.revoke_refresh_tokens()
            await time_passes()
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await sign_in((await open_card(chat, ADA)).url, "ada")
    assert [text(r)[-7:] for r in results] == ["for ada"] * 3
    assert cards_after_refresh == 1 and len(chat.cards) == 2
    assert web.provider.counts["refresh"] == 2 and web.provider.counts["authorize"] == 2


async def test_a_parked_call_continues_on_its_requester_s_own_session(web: Site) -> None:
    async with bridge(web) as (host, chat, _):
        async def connect(person: Actor, user: str) -> None:
            async with anyio.create_task_group() as tg:
                tg.start_soon(host.calls.run, CHANNEL, person, "s", "whoami", {})
                await sign_in((await open_card(chat, person)).url, user)

        with anyio.fail_after(patient(30)):
            await connect(ADA, "ada")
            await connect(BOB, "bob")
            assert await host.calls.run(CHANNEL, ADA, "s", "whoami_asking", {}, park=True) is None  # parked
            card = await chat.wait_for(lambda: next((c for c in chat.cards.values() if c.message == "Say a word"),
                                                    None))
            assert host.calls.rounds.parked  # nothing waits for the card: no task, no session held for it
            for session in host.pool.sessions():
                await host.pool.close(session)  # as the idle reaper would while she thinks
            await host.decide(DecisionIn(card.id, ADA, "accept", {"word": "hello"}))
            said = await chat.wait_message("s.whoami_asking:")
            sessions = [s.key for s in host.pool.sessions()]
    assert said.endswith("hello for ada")  # continued with her own account, not Bob's, and not refused
    assert sessions == [(CHANNEL.id(), "s", ADA.key)]
    assert web.provider.counts["authorize"] == 2  # no new sign-in: her stored token
