"""The sign-in redirect: single-use state bound to a person, expiry, the authorization server's refusals in plain
words, a page that waits for the code's exchange before saying how the sign-in ended (and never a false "signed in"
when that takes too long), and the loopback listener answering over real HTTP."""

from __future__ import annotations

import socket

import anyio
import httpx2
import pytest
from mcp.shared.auth import AuthorizationCodeResult

from bridge.auth.callback import LoopbackListener
from bridge.auth.signins import Authorization, Authorizations, Page, plain_oauth_error
from bridge.errors import AuthError
from tests.harness.hosts import patient

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

URL = "https://as.example.com/authorize?client_id=c&state=S1&code_challenge=x"


async def redirect(auths: Authorizations, pending: Authorization, params: dict[str, str], person: str | None = None,
                   exchanged: str | None = None) -> tuple[AuthorizationCodeResult, Page]:
    """A browser brings `params` back while the flow waits: the flow gets the code and exchanges it (`exchanged`:
    the error that ended it, None for tokens stored), and only then does the browser get its page."""
    pages: list[Page] = []
    async with anyio.create_task_group() as tg:
        async def browser() -> None:
            pages.append(await auths.receive(params, person))

        tg.start_soon(browser)
        result = await auths.wait(pending)
        await anyio.wait_all_tasks_blocked()
        assert pages == []  # nothing said to the browser before the code's exchange ended
        auths.settle(pending.state, exchanged)
    return result, pages[0]


async def test_a_redirect_finishes_its_sign_in_once() -> None:
    auths = Authorizations()
    pending = auths.begin(URL, server="github", person="slack:U1", ttl=60)
    result, page = await redirect(auths, pending, {"code": "C", "state": "S1", "iss": "https://as.example.com"})
    assert page.status == 200 and "signed in to github" in page.text
    assert (result.code, result.state, result.iss) == ("C", "S1", "https://as.example.com")
    assert pending.finished.is_set() and pending.error is None
    replay = await auths.receive({"code": "C", "state": "S1"})
    assert replay.status == 400 and "already used" in replay.text


async def test_a_code_whose_exchange_fails_gets_a_failure_page_and_a_slow_one_no_false_success() -> None:
    auths = Authorizations()
    pending = auths.begin(URL, server="github", person="slack:U1", ttl=60)
    refused = "the authorization server refused the sign-in to github: the sign-in is no longer valid"
    _, page = await redirect(auths, pending, {"code": "C", "state": "S1"}, exchanged=refused)
    assert page.status == 400 and page.title == "Sign-in failed" and pending.error == refused
    assert page.text == "The authorization server refused the sign-in to github: the sign-in is no longer valid."
    # The exchange's outcome does not come in time: the page says it is being finished, never "signed in".
    slow = Authorizations(outcome_wait=0)
    late = slow.begin(URL, server="github", person="slack:U1", ttl=60)
    page = await slow.receive({"code": "C", "state": "S1"})
    assert page.status == 202 and "being finished" in page.text and "signed in" not in page.text.lower()
    assert (await slow.wait(late)).code == "C" and not late.finished.is_set()
    slow.settle("S1", None)
    assert late.finished.is_set() and late.error is None


async def test_a_tampered_state_is_refused_and_the_sign_in_keeps_waiting() -> None:
    auths = Authorizations()
    pending = auths.begin(URL, server="github", person="slack:U1", ttl=60)
    assert (await auths.receive({"code": "C", "state": "S1x"})).status == 400
    assert (await auths.receive({"code": "C"})).status == 400
    assert not pending.done.is_set()
    result, page = await redirect(auths, pending, {"code": "C2", "state": "S1"})
    assert page.status == 200 and result.code == "C2"


async def test_only_the_person_it_was_started_for_can_finish_it() -> None:
    auths = Authorizations()
    pending = auths.begin(URL, server="github", person="slack:U1", ttl=60)
    other = await auths.receive({"code": "C", "state": "S1"}, person="slack:U2")
    assert other.status == 403 and not pending.done.is_set()
    assert (await redirect(auths, pending, {"code": "C", "state": "S1"}, person="slack:U1"))[1].status == 200


async def test_an_expired_sign_in_is_refused_and_reported() -> None:
    auths = Authorizations()
    pending = auths.begin(URL, server="github", person="slack:U1", ttl=0)
    assert (await auths.receive({"code": "C", "state": "S1"})).status == 400
    with pytest.raises(AuthError, match="nobody finished signing in to github in time"):
        await auths.wait(pending)


async def test_a_refusal_by_the_authorization_server_is_told_in_plain_words() -> None:
    auths = Authorizations()
    pending = auths.begin(URL, server="github", person="slack:U1", ttl=60)
    page = await auths.receive({"error": "access_denied", "error_description": "<b>nope</b>", "state": "S1"})
    assert page.status == 400 and "<b>" not in page.html() and "&lt;b&gt;" in page.html()
    with pytest.raises(AuthError, match=r"refused the sign-in to github: access was declined \(<b>nope</b>\)"):
        await auths.wait(pending)
    assert plain_oauth_error("weird_" + "x" * 200).startswith("it answered 'weird_")
    with pytest.raises(AuthError, match="no state"):
        auths.begin("https://as.example.com/authorize?client_id=c", server="github", person="p", ttl=60)


async def test_the_loopback_listener_answers_the_redirect_over_http() -> None:
    auths = Authorizations()
    listener = LoopbackListener(auths)
    assert listener.redirect_uri.startswith("http://127.0.0.1:") and listener.redirect_uri.endswith("/callback")
    pending = auths.begin(URL, server="github", person="console:you", ttl=60)
    try:
        async with listener.serving(), httpx2.AsyncClient() as http:
            forged = await http.get(listener.redirect_uri, params={"code": "C", "state": "nope"})
            assert forged.status_code == 400 and forged.headers["cache-control"] == "no-store"
            pages: list[httpx2.Response] = []
            with anyio.fail_after(patient(5)):
                async with anyio.create_task_group() as tg:
                    async def browser() -> None:
                        pages.append(await http.get(listener.redirect_uri, params={"code": "C", "state": "S1"}))

                    tg.start_soon(browser)
                    assert (await auths.wait(pending)).code == "C"
                    auths.settle("S1", None)  # the flow stored its tokens: now the browser hears it
            done = pages[0]
            assert done.status_code == 200 and done.headers["referrer-policy"] == "no-referrer"
            assert "You are signed in to github." in done.text
    finally:
        listener.close()


def test_a_redirect_uri_the_terminal_cannot_receive_is_refused() -> None:
    with pytest.raises(AuthError, match="not a loopback"):
        LoopbackListener(Authorizations(), "https://bridge.example.com/oauth/callback")
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        port = taken.getsockname()[1]
        with pytest.raises(AuthError, match="cannot listen"):
            LoopbackListener(Authorizations(), f"http://127.0.0.1:{port}/callback")
    finally:
        taken.close()
    with pytest.raises(AuthError, match="with a port"):
        LoopbackListener(Authorizations(), "http://127.0.0.1/callback")
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()
    fixed = LoopbackListener(Authorizations(), f"http://localhost:{port}/oauth/cb")
    assert fixed.redirect_uri == f"http://localhost:{port}/oauth/cb"
    fixed.close()
