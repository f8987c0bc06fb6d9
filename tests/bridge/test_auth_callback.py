"""The sign-in redirect: single-use state bound to a person, expiry, the authorization server's refusals in plain
words, and the loopback listener answering over real HTTP."""

from __future__ import annotations

import socket

import anyio
import httpx2
import pytest

from bridge.auth.callback import LoopbackListener
from bridge.auth.signins import Authorizations, plain_oauth_error
from bridge.errors import AuthError

pytestmark = pytest.mark.anyio

URL = "https://as.example.com/authorize?client_id=c&state=S1&code_challenge=x"


async def test_a_redirect_finishes_its_sign_in_once() -> None:
    auths = Authorizations()
    pending = auths.begin(URL, server="github", person="slack:U1", ttl=60)
    page = auths.receive({"code": "C", "state": "S1", "iss": "https://as.example.com"})
    assert page.status == 200 and "signed in to github" in page.text
    result = await auths.wait(pending)
    assert (result.code, result.state, result.iss) == ("C", "S1", "https://as.example.com")
    replay = auths.receive({"code": "C", "state": "S1"})
    assert replay.status == 400 and "already used" in replay.text


async def test_a_tampered_state_is_refused_and_the_sign_in_keeps_waiting() -> None:
    auths = Authorizations()
    pending = auths.begin(URL, server="github", person="slack:U1", ttl=60)
    assert auths.receive({"code": "C", "state": "S1x"}).status == 400
    assert auths.receive({"code": "C"}).status == 400
    assert not pending.done.is_set()
    assert auths.receive({"code": "C2", "state": "S1"}).status == 200
    assert (await auths.wait(pending)).code == "C2"


async def test_only_the_person_it_was_started_for_can_finish_it() -> None:
    auths = Authorizations()
    pending = auths.begin(URL, server="github", person="slack:U1", ttl=60)
    other = auths.receive({"code": "C", "state": "S1"}, person="slack:U2")
    assert other.status == 403 and not pending.done.is_set()
    assert auths.receive({"code": "C", "state": "S1"}, person="slack:U1").status == 200


async def test_an_expired_sign_in_is_refused_and_reported() -> None:
    auths = Authorizations()
    pending = auths.begin(URL, server="github", person="slack:U1", ttl=0)
    assert auths.receive({"code": "C", "state": "S1"}).status == 400
    with pytest.raises(AuthError, match="nobody finished signing in to github in time"):
        await auths.wait(pending)


async def test_a_refusal_by_the_authorization_server_is_told_in_plain_words() -> None:
    auths = Authorizations()
    pending = auths.begin(URL, server="github", person="slack:U1", ttl=60)
    page = auths.receive({"error": "access_denied", "error_description": "<b>nope</b>", "state": "S1"})
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
            done = await http.get(listener.redirect_uri, params={"code": "C", "state": "S1"})
            assert done.status_code == 200 and done.headers["referrer-policy"] == "no-referrer"
            with anyio.fail_after(5):
                assert (await auths.wait(pending)).code == "C"
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
