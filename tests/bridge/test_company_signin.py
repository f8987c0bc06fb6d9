"""Company sign-in (enterprise-managed authorization), end to end through the core: a fake chat port, the test's
company identity provider (OpenID Connect with token exchange) and two real protected MCP servers that take its
ID-JAGs, the bridge's HTTP server receiving the redirect. Each person signs in once, privately, and then uses both
servers as themselves with no prompt for the second; someone the company has not assigned is refused in plain
words; an expired ID token is refreshed silently; `logout --all` ends every server's access; no token is ever in
chat, the logs, or the token file in the clear."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from mcp.types import CallToolResult

from bridge.config.file import Config, HttpConfig
from bridge.door.model import Actor, MessageIn
from bridge.host import Host
from tests.harness.hosts import FakeChatPort, host_for, patient
from tests.servers.enterprise import Company, company
from tests.servers.signin import ADA, BOB, CHANNEL, CY, open_card, redirects, sign_in, text

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

@pytest.fixture
def acme(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Company]:
    with company(tmp_path, monkeypatch) as c:
        yield c


@asynccontextmanager
async def bridge(acme: Company) -> AsyncIterator[tuple[Host, FakeChatPort]]:
    config = Config(servers=acme.server_configs(), store=":memory:", conversation_scope="channel",
                    http=HttpConfig(listen="127.0.0.1:0"), **acme.settings())
    host, chat = await host_for(config)
    async with host, redirects(host):
        yield host, chat


async def signed_in_call(host: Host, chat: FakeChatPort, person: Actor, user: str, server: str) -> str:
    """The person's call, which asks them to sign in at the company first; they do, as `user`."""
    results: list[CallToolResult | None] = []

    async def call() -> None:
        results.append(await host.calls.run(CHANNEL, person, server, "whoami", {}))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        card = await open_card(chat, person)
        await sign_in(card.url, user)
    return text(results[0])


async def test_two_people_sign_in_once_and_use_both_servers_as_themselves(
        acme: Company, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    async with bridge(acme) as (host, chat):
        with anyio.fail_after(patient(30)):
            ada_crm = await signed_in_call(host, chat, ADA, "ada", "crm")
            ada_wiki = text(await host.calls.run(CHANNEL, ADA, "wiki", "whoami", {}))
            bob_wiki = await signed_in_call(host, chat, BOB, "bob", "wiki")
            bob_crm = text(await host.calls.run(CHANNEL, BOB, "crm", "whoami", {}))
            accounts = await host.accounts.connected(ADA)
    assert (ada_crm, ada_wiki, bob_wiki, bob_crm) == ("ada@example.com", "ada@example.com", "bob@example.com",
                                                      "bob@example.com")
    # One sign-in each, at the company: no prompt, no consent screen for the second server.
    assert len(chat.cards) == 2 and acme.idp.counts["authorize"] == 2
    assert all(p.counts["authorize"] == 0 and p.counts["register"] == 0 for p in acme.servers.values())
    card = next(iter(chat.cards.values()))
    assert card.private and "Connect Acme SSO" in card.message and card.url.startswith(acme.idp.issuer)
    # The exchanges asked for an ID-JAG for each server's authorization server and resource.
    assert sorted((e["audience"], e["resource"]) for e in acme.idp.exchanges) == sorted(
        (acme.servers[n].base, acme.urls[n]) for n in ("crm", "crm", "wiki", "wiki"))
    assert accounts == ["Acme SSO (company sign-in)", "crm", "wiki"]
    # No token ever reaches chat or the logs (debug included), nor the token file in the clear.
    shown = "\n".join([m.text for m in chat.messages] + [repr(c) for c in chat.cards.values()] + [caplog.text])
    assert acme.issued() and not any(token in shown for token in acme.issued())
    stored = acme.tokens.read_bytes()
    assert not any(token.encode() in stored for token in acme.issued())


async def test_someone_the_company_has_not_assigned_is_refused_plainly(acme: Company) -> None:
    async with bridge(acme) as (host, chat):
        with anyio.fail_after(patient(30)):
            async with anyio.create_task_group() as tg:
                results: list[CallToolResult | None] = []

                async def call() -> None:
                    results.append(await host.calls.run(CHANNEL, CY, "crm", "whoami", {}))

                tg.start_soon(call)
                card = await open_card(chat, CY)
                visit = await sign_in(card.url, "cy")
    assert results == [None] and visit.status == 400
    said = [m.text for m in chat.messages if m.conversation == CHANNEL][-1]
    assert "refused the sign-in to Acme SSO" in said and "access was declined" in said and "not assigned" in said
    assert acme.idp.counts["exchange"] == 0 and all(p.counts["jwt-bearer"] == 0 for p in acme.servers.values())


async def test_an_expired_id_token_is_refreshed_without_asking(acme: Company) -> None:
    acme.idp.id_token_ttl = 30  # within the minute before expiry the bridge refreshes
    async with bridge(acme) as (host, chat):
        with anyio.fail_after(patient(30)):
            await signed_in_call(host, chat, ADA, "ada", "crm")
            wiki = text(await host.calls.run(CHANNEL, ADA, "wiki", "whoami", {}))
    assert wiki == "ada@example.com" and len(chat.cards) == 1 and acme.idp.counts["refresh"] == 1


async def test_an_id_token_the_company_no_longer_takes_is_refreshed_without_asking(acme: Company) -> None:
    async with bridge(acme) as (host, chat):
        with anyio.fail_after(patient(30)):
            await signed_in_call(host, chat, ADA, "ada", "crm")
            acme.idp.rejected.update(acme.idp.issued)
            wiki = text(await host.calls.run(CHANNEL, ADA, "wiki", "whoami", {}))
    assert wiki == "ada@example.com" and len(chat.cards) == 1 and acme.idp.counts["refresh"] == 1


async def test_a_company_session_ended_means_signing_in_again(acme: Company) -> None:
    acme.idp.id_token_ttl = 30
    async with bridge(acme) as (host, chat):
        with anyio.fail_after(patient(30)):
            await signed_in_call(host, chat, ADA, "ada", "crm")
            acme.idp.revoke_sessions()
            again = await signed_in_call(host, chat, ADA, "ada", "wiki")
    assert again == "ada@example.com" and len(chat.cards) == 2


async def test_logout_all_ends_every_servers_access(acme: Company) -> None:
    async with bridge(acme) as (host, chat):
        async def command(person: Actor, line: str) -> str:
            before = len(chat.messages)
            await host.run_message(MessageIn(CHANNEL, person, line, explicit_command=True))
            return "\n".join(m.text for m in chat.messages[before:])

        with anyio.fail_after(patient(30)):
            await signed_in_call(host, chat, ADA, "ada", "crm")
            text(await host.calls.run(CHANNEL, ADA, "wiki", "whoami", {}))
            listed = await command(ADA, "accounts")
            one = await command(ADA, "logout wiki")
            said = await command(ADA, "logout --all")
            assert not await host.accounts.clients.company().signed_in(ADA.key)
            after = await command(ADA, "accounts")
            again = await signed_in_call(host, chat, ADA, "ada", "wiki")
    assert "Acme SSO (company sign-in), crm, wiki" in listed
    assert one.startswith("Disconnected wiki. You are still signed in with Acme SSO")
    assert said == "Signed out of Acme SSO (company sign-in), crm: every sign-in of yours there was forgotten."
    assert "You have not connected" in after
    assert again == "ada@example.com" and len(chat.cards) == 2
    assert len(acme.idp.revoked) == 1 and acme.idp.revoked[0] in acme.idp.issued  # her refresh token, at the company


async def test_without_issuer_the_servers_metadata_names_its_authorization_server(acme: Company) -> None:
    config = Config(servers={"wiki": acme.server("wiki", issuer=False)}, store=":memory:",
                    conversation_scope="channel", http=HttpConfig(listen="127.0.0.1:0"), **acme.settings())
    host, chat = await host_for(config)
    async with host, redirects(host):
        with anyio.fail_after(patient(30)):
            wiki = await signed_in_call(host, chat, ADA, "ada", "wiki")
    assert wiki == "ada@example.com" and [e["audience"] for e in acme.idp.exchanges] == [acme.servers["wiki"].base]


async def test_a_server_the_company_has_not_connected_is_told_plainly(acme: Company) -> None:
    acme.idp.apps.pop(acme.servers["wiki"].base)  # no Cross App Access connection for wiki
    async with bridge(acme) as (host, chat):
        with anyio.fail_after(patient(30)):
            await signed_in_call(host, chat, ADA, "ada", "crm")
            refused = await host.calls.run(CHANNEL, ADA, "wiki", "whoami", {})
    said = [m.text for m in chat.messages if m.conversation == CHANNEL][-1]
    assert refused is None and len(chat.cards) == 1
    assert "Acme SSO did not grant access to wiki: it does not issue access for this server's address" in said
    assert "Traceback" not in said and acme.servers["wiki"].counts["jwt-bearer"] == 0
