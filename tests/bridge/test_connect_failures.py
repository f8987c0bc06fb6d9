"""Per-person sign-ins that do not go to plan, in chat (a fake chat port; the real protected MCP server, its
authorization server and the bridge's HTTP server): the authorization server's refusals told in plain words to the
browser, on the card and in chat (at the consent screen, and at the token endpoint), a redirect that comes after its
prompt expired refused, and an expired refresh token asking the person again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp.types import CallToolResult

from bridge.auth.tokens import VaultStorage
from bridge.door.model import Actor, Status
from tests.bridge.test_connect import bridge, start_whoami
from tests.harness.hosts import patient
from tests.servers.signin import ADA, CHANNEL, Site, get, open_card, sign_in, site, text

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]


@pytest.fixture
def web(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    with site(tmp_path, monkeypatch) as s:
        yield s


async def follow_back(url: str) -> httpx2.Response:
    """A browser at a consent screen that redirects straight back (here: with the refusal)."""
    async with httpx2.AsyncClient(timeout=30) as http:
        refused = await http.get(url)
        assert refused.status_code == 302, refused.text
        return await http.get(refused.headers["location"])


async def test_a_refusal_at_the_consent_screen_is_told_in_plain_words_to_the_browser_card_and_chat(web: Site) -> None:
    web.provider.decline = True
    async with bridge(web) as (host, chat, _):
        with anyio.fail_after(patient(30)):
            async with anyio.create_task_group() as tg:
                results = start_whoami(tg, host, ADA)
                card = await open_card(chat, ADA)
                page = await follow_back(card.url)
            outcome = await chat.wait_finished(card.id)
    said = [m.text for m in chat.messages if m.conversation == CHANNEL]
    plain = "the authorization server refused the sign-in to s: access was declined (The person said no)"
    assert page.status_code == 400 and "Sign-in refused" in page.text and plain[1:] in page.text
    assert outcome.status is Status.FAILED and plain in (outcome.reason or "")
    assert results == [None] and any(plain in m for m in said)
    assert not any("failed to start" in m or "Traceback" in m for m in said)


async def test_a_code_the_token_endpoint_refuses_is_told_in_plain_words_to_the_browser_card_and_chat(
        web: Site) -> None:
    web.provider.refuse_code = True
    async with bridge(web) as (host, chat, _):
        with anyio.fail_after(patient(30)):
            async with anyio.create_task_group() as tg:
                results = start_whoami(tg, host, ADA)
                card = await open_card(chat, ADA)
                visit = await sign_in(card.url, "ada")
            outcome = await chat.wait_finished(card.id)
        vault = host.accounts.clients.vault(host.config.servers["s"])
        stored = await VaultStorage(vault, web.url, ADA.key).get_tokens()
    said = "\n".join(m.text for m in chat.messages if m.conversation == CHANNEL)
    plain = "the authorization server refused the sign-in to s: the sign-in is no longer valid (used, expired or " \
        "revoked); run the call again to sign in anew (The code has already been used)"
    # The browser is told the truth, not "signed in": the page waited for the code's exchange.
    assert visit.status == 400 and "Sign-in failed" in visit.page and plain[1:] in visit.page
    assert "signed in" not in visit.page and "invalid_grant" not in visit.page and "{" not in visit.page
    assert outcome.status is Status.FAILED and outcome.reason == plain  # the card: not connected, and why
    assert stored is None and web.provider.counts["code"] == 1 and results == [None] and plain in said
    assert "failed to start" not in said and "{" not in said  # no raw JSON body, no start failure


async def test_a_redirect_after_its_prompt_expired_is_refused(web: Site) -> None:
    async with bridge(web, sign_in_time=1.0) as (host, chat, _):
        with anyio.fail_after(patient(30)):
            async with anyio.create_task_group() as tg:
                tg.start_soon(host.calls.run, CHANNEL, ADA, "s", "whoami", {})
                card = await open_card(chat, ADA)
                # She opens the link and signs in, but the redirect back is only followed after the prompt expired.
                async with httpx2.AsyncClient(timeout=30) as http:
                    to_login = await http.get(card.url)
                    back = await http.get(f"{to_login.headers['location']}&user=ada")
                await chat.wait_finished(card.id)
            late = await get(back.headers["location"])
            told = await chat.wait_message("did not connect s within 1 s")
    assert late.status_code == 400 and "expired" in late.text
    assert "run the call again for a new prompt" in told
    assert web.provider.counts["code"] == 0  # the late code was never exchanged


async def test_an_expired_refresh_token_asks_the_person_again(web: Site) -> None:
    async with bridge(web) as (host, chat, _):
        server = host.config.servers["s"]
        results: list[CallToolResult | None] = []

        async def call(person: Actor = ADA) -> None:
            results.append(await host.calls.run(CHANNEL, person, "s", "whoami", {}))

        with anyio.fail_after(patient(30)):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await sign_in((await open_card(chat, ADA)).url, "ada")
            # Time passes: both her access token and her refresh token are past their expiry.
            storage = VaultStorage(host.accounts.clients.vault(server), web.url, ADA.key)
            token = await storage.get_tokens()
            assert token is not None
            token.expires_in = -60
            await storage.set_tokens(token)
            web.provider.expire_access_tokens()
            web.provider.expire_refresh_tokens()
            host.accounts.clients.forget(server, ADA.key)
            await host.pool.close_person("s", ADA)
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                second = await open_card(chat, ADA)
                await sign_in(second.url, "ada")
    assert [text(r)[-7:] for r in results] == ["for ada"] * 2
    assert len(chat.cards) == 2 and web.provider.counts["refresh"] == 1 and web.provider.counts["authorize"] == 2
