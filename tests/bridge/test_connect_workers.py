"""Per-person sign-ins with two workers on one Postgres store, each with its own HTTP server (a load balancer may send
the sign-in's redirect to either): the redirect landing on the worker that did not start the sign-in hands the code
to the one that did, whose exchange the page waits for; the state cannot be used again on either worker; a refusal
reaches the waiting call; a worker that died is named plainly, and the person is asked again on their next call.
(Real local authorization server and protected MCP server: `tests/servers/signin.py`.)"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import anyio
import httpx2
import pytest

from bridge.auth.tokens import VaultStorage
from bridge.config.file import Config, HttpConfig
from bridge.host import Host
from bridge.storage import SqlStore, open_store
from bridge.web.server import HttpServer
from tests.bridge.test_connect import start_whoami
from tests.harness.hosts import FakeChatPort, host_for, patient
from tests.servers.signin import ADA, CHANNEL, KEY_ENV, Site, Visit, get, open_card, redirects, sign_in, site, text

pytestmark = pytest.mark.anyio

Worker = tuple[Host, FakeChatPort, HttpServer]


@pytest.fixture
def web(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    with site(tmp_path, monkeypatch) as s:
        yield s


@asynccontextmanager
async def two_workers(web: Site, url: str) -> AsyncIterator[tuple[Worker, Worker]]:
    """Workers "a" and "b" on the Postgres store at `url` (which keeps the sealed tokens too), each serving HTTP."""
    async with AsyncExitStack() as stack:
        started = []
        for name in ("a", "b"):
            store = await open_store(url, worker_id=name)
            stack.push_async_callback(store.aclose)
            config = Config(servers={"s": web.server()}, store=url, conversation_scope="channel",
                            http=HttpConfig(listen="127.0.0.1:0"), secrets_key_env=KEY_ENV, token_store=url)
            host, chat = await host_for(config, store)
            await stack.enter_async_context(host)
            http = await stack.enter_async_context(redirects(host))
            started.append((host, chat, http))
        yield started[0], started[1]


def elsewhere(callback: str, http: HttpServer) -> str:
    """The same redirect, as a load balancer would send it to another worker."""
    parts = urlsplit(callback)
    return http.url(parts.path) + "?" + parts.query


async def sign_in_at(url: str, user: str, http: HttpServer, *, denied: bool = False) -> Visit:
    """Follow a Connect link as `user`, the redirect reaching the worker serving `http` (`denied`: the person
    declines at the authorization server, which redirects back with `error=access_denied`)."""
    query = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    async with httpx2.AsyncClient(timeout=30) as client:
        if denied:
            callback_url = f"{query['redirect_uri']}?{urlencode({'error': 'access_denied', 'state': query['state']})}"
        else:
            to_login = await client.get(url)
            assert to_login.status_code == 302, to_login.text
            back = await client.get(f"{to_login.headers['location']}&user={user}")
            assert back.status_code == 302, back.text
            callback_url = back.headers["location"]
        page = await client.get(elsewhere(callback_url, http))
    return Visit(query, callback_url, page.status_code, page.text)


async def test_a_redirect_on_the_other_worker_signs_in_once_and_the_call_goes_on_as_that_person(
        web: Site, pg_url: str) -> None:
    async with two_workers(web, pg_url) as ((a, chat_a, http_a), (b, chat_b, http_b)):
        with anyio.fail_after(patient(30)):
            async with anyio.create_task_group() as tg:
                result = start_whoami(tg, a, ADA)
                card = await open_card(chat_a, ADA)
                visit = await sign_in_at(card.url, "ada", http_b)
                # The page on b says "signed in" only once a exchanged the code and her token was kept.
                stored_at_page = await VaultStorage(a.accounts.clients.vault(a.config.servers["s"]), web.url,
                                                    ADA.key).get_tokens()
            replayed_on_a = await get(visit.callback)
            replayed_on_b = await get(elsewhere(visit.callback, http_b))
            finished = await chat_a.wait_finished(card.id)
            # Her token is in the shared store: b uses it without asking her again.
            on_b = await b.calls.run(CHANNEL, ADA, "s", "whoami", {})
        assert isinstance(a.store, SqlStore)
        [row] = await a.store.driver.fetch("SELECT * FROM signins")
    assert urlsplit(visit.callback).netloc == urlsplit(http_a.url("/")).netloc  # a asked for the redirect to itself
    assert visit.status == 200 and "You are signed in to s." in visit.page and stored_at_page is not None
    assert text(result[0]).endswith("for ada") and text(on_b).endswith("for ada")
    assert finished.reason == "connected"
    for replayed in (replayed_on_a, replayed_on_b):
        assert replayed.status_code == 400 and "already used" in replayed.text
    assert web.provider.counts["authorize"] == 1 and chat_b.cards == {}
    assert visit.query["state"] not in str(row) and row[-4:-1] == (None, None, None)  # no state, no code kept


async def test_a_refusal_on_the_other_worker_ends_the_waiting_call_in_plain_words(web: Site, pg_url: str) -> None:
    async with two_workers(web, pg_url) as ((a, chat_a, _), (_b, _, http_b)):
        with anyio.fail_after(patient(30)):
            async with anyio.create_task_group() as tg:
                result = start_whoami(tg, a, ADA)
                card = await open_card(chat_a, ADA)
                visit = await sign_in_at(card.url, "ada", http_b, denied=True)
            said = await chat_a.wait_message("refused the sign-in")
            finished = await chat_a.wait_finished(card.id)
    assert visit.status == 400 and "Sign-in refused" in visit.page and "access was declined" in visit.page
    assert result == [None] and "the authorization server refused the sign-in to s: access was declined" in said
    assert finished.reason is not None and "access was declined" in finished.reason


async def test_a_dead_worker_s_sign_in_is_told_plainly_and_the_next_call_asks_again(web: Site, pg_url: str) -> None:
    async with two_workers(web, pg_url) as ((a, chat_a, _), (b, chat_b, http_b)):
        with anyio.fail_after(patient(30)):
            async with anyio.create_task_group() as tg:
                start_whoami(tg, a, ADA)
                card = await open_card(chat_a, ADA)
                # a stops renewing its lease (as after a SIGKILL, once the lease lapsed): nobody holds the code's
                # verifier any more.
                await a.store.heartbeat(0)
                visit = await sign_in_at(card.url, "ada", http_b)
                tg.cancel_scope.cancel()
            async with anyio.create_task_group() as tg:  # her next call, on b, asks her again
                again = start_whoami(tg, b, ADA)
                second = await open_card(chat_b, ADA)
                await sign_in(second.url, "ada")
    assert visit.status == 503 and "has stopped, so it cannot be finished" in visit.page
    assert "asked to sign in anew" in visit.page and "Signed in" not in visit.page
    assert text(again[0]).endswith("for ada")
