"""The web-form routes over real HTTP, answered through a real host and real MCP servers on both protocol eras."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any
from urllib.parse import urlencode

import anyio
import httpx2
import pytest

from bridge.config.file import HttpConfig
from bridge.door.model import DecisionIn, Status
from bridge.web.forms import web_forms
from bridge.web.forms.page import CSP
from bridge.web.server import HttpServer
from tests.harness.hosts import ALICE, BOB, patient
from tests.servers.inline import form_server
from tests.webform.site import Site, running

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

ERAS = ["legacy", "auto"]
OK_SCHEMA = json.dumps({"type": "object", "properties": {"ok": {"type": "boolean", "title": "OK?"}},
                        "required": ["ok"]})
FULL_POST = [("f0", "Ada Lovelace"), ("f1", "ada@example.com"), ("f2", "https://example.org/ada"),
             ("f3", "2026-12-01"), ("f4", "2026-12-01T09:30"), ("f4_tz", "+01:00"), ("f5", "3"), ("f6", "99.5"),
             ("f7", "on"), ("f8", "cold"), ("f9", "osl"), ("f10", "x"), ("f11", "hiking"), ("f11", "beach"),
             ("f12", "pk")]
FULL_CONTENT = {"name": "Ada Lovelace", "email": "ada@example.com", "homepage": "https://example.org/ada",
                "start": "2026-12-01", "pickup": "2026-12-01T09:30:00+01:00", "travellers": 3, "budget": 99.5,
                "window": True, "climate": "cold", "city": "osl", "room": "x", "activities": ["hiking", "beach"],
                "extras": ["pk"]}


async def post(site: Site, url: str, items: list[tuple[str, str]], action: str = "accept",
               **headers: str) -> httpx2.Response:
    async with httpx2.AsyncClient() as client:
        return await client.post(url, content=urlencode([*items, ("action", action)]),
                                 headers={"Content-Type": "application/x-www-form-urlencoded", "Origin": site.base,
                                          "Sec-Fetch-Site": "same-origin", **headers})


async def get(url: str) -> httpx2.Response:
    async with httpx2.AsyncClient() as client:
        return await client.get(url)


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_posted_form_reaches_the_server_typed_through_the_same_door_as_a_chat_answer(protocol: str) -> None:
    async with running({"forms": form_server()}, server_protocol=protocol) as site:
        with anyio.fail_after(patient(20)):
            card = await site.call("forms", "fill")
            url = site.link(card)
            page = await get(url)
            assert page.status_code == 200 and 'value="120.5"' in page.text
            sent = await post(site, url, FULL_POST)
            result = json.loads(await site.result("forms", "fill"))
            outcome = await site.chat.wait_finished(card.id)
    assert sent.status_code == 200 and "Thanks — sent" in sent.text
    assert result["action"] == "accept" and result["content"] == FULL_CONTENT
    assert (outcome.status, outcome.by) == (Status.ACCEPTED, ALICE)
    assert [(r.outcome, r.actor) for r in await site.host.store.audit_rows(card.id)] == [("accepted", ALICE.key)]


async def test_headers_and_server_text_escaped() -> None:
    schema = json.dumps({"type": "object", "properties": {
        "x": {"type": "string", "title": "<script>alert(1)</script>", "description": "<img src=x onerror=alert(2)>",
              "default": '"><script>alert(3)</script>'}}})
    async with running({"forms": form_server()}) as site:
        with anyio.fail_after(patient(20)):
            card = await site.call("forms", "fill", {"schema": schema})
            page = await get(site.link(card))
    assert page.headers["content-security-policy"] == CSP
    assert CSP.startswith("default-src 'none'; style-src 'sha256-")
    assert "form-action 'self'; frame-ancestors 'none'; base-uri 'none'" in CSP
    assert page.headers["x-frame-options"] == "DENY" and page.headers["cache-control"] == "no-store"
    assert "<script" not in page.text and "<img" not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
    assert 'value="&#34;&gt;&lt;script&gt;alert(3)&lt;/script&gt;"' in page.text
    assert "Please fill this in &lt;b&gt;now&lt;/b&gt;" in page.text


async def test_a_refused_answer_is_shown_beside_its_field_with_the_values_kept_then_corrected() -> None:
    async with running({"forms": form_server()}) as site:
        with anyio.fail_after(patient(20)):
            card = await site.call("forms", "fill")
            url = site.link(card)
            bad = [(k, "ada@example" if k == "f1" else v) for k, v in FULL_POST]
            refused = await post(site, url, bad)
            assert card.id not in site.chat.finished
            fixed = await post(site, url, FULL_POST)
            result = json.loads(await site.result("forms", "fill"))
    assert refused.status_code == 422
    field = refused.text.split('id="f1-field"', 1)[1].split('id="f2-field"', 1)[0]
    assert 'value="ada@example"' in field and 'aria-invalid="true"' in field
    assert "enter an email address like name@example.com" in field
    assert 'value="Ada Lovelace"' in refused.text and 'value="99.5"' in refused.text
    assert fixed.status_code == 200 and result["content"] == FULL_CONTENT


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_decline_and_cancel_need_nothing_filled_in(action: str) -> None:
    async with running({"forms": form_server()}) as site:
        with anyio.fail_after(patient(20)):
            card = await site.call("forms", "fill")
            sent = await post(site, site.link(card), [], action)
            result = json.loads(await site.result("forms", "fill"))
    assert sent.status_code == 200 and (result["action"], result["content"]) == (action, None)


async def test_a_link_is_spent_by_its_decision_and_refused_after() -> None:
    async with running({"forms": form_server()}) as site:
        with anyio.fail_after(patient(20)):
            card = await site.call("forms", "fill", {"schema": OK_SCHEMA})
            url = site.link(card)
            assert (await post(site, url, [("f0", "on")])).status_code == 200
            again_get, again_post = await get(url), await post(site, url, [("f0", "on")])
    for again in (again_get, again_post):
        assert again.status_code == 410 and "This link has already been used" in again.text
    assert len(await site.host.store.audit_rows(card.id)) == 1


async def test_expired_tampered_and_strangers_links_are_refused_and_the_card_stays_open() -> None:
    async with running({"forms": form_server()}, lifetime=60) as site:
        with anyio.fail_after(patient(20)):
            card = await site.call("forms", "fill", {"schema": OK_SCHEMA})
            url = site.link(card)
            assert site.forms.link_for(card, BOB) is None
            claims = site.forms.links.check(url.rsplit("/", 1)[1])
            assert not isinstance(claims, str)
            bobs = site.base + "/form/" + site.forms.links.sign(replace(claims, actor=BOB))
            stranger, stranger_post = await get(bobs), await post(site, bobs, [("f0", "on")])
            tampered = await get(url[:-3] + ("AAA" if not url.endswith("AAA") else "BBB"))
            cross = await post(site, url, [("f0", "on")], Origin="https://evil.example")
            cross_fetch = await post(site, url, [("f0", "on")], **{"Sec-Fetch-Site": "cross-site"})
            site.clock.offset = 61
            expired = await get(url)
            expired_post = await post(site, url, [("f0", "on")])
            still_open = site.host.open_interaction(card.id)
            audit = await site.host.store.audit_rows(card.id)
    assert still_open == card and audit == []
    assert site.chat.notices == []  # nothing reached the core's decision door
    assert stranger.status_code == stranger_post.status_code == 403
    assert "Only Alice can answer this request." in stranger.text
    assert tampered.status_code == 400 and "This link is not valid" in tampered.text
    assert cross.status_code == cross_fetch.status_code == 403
    assert expired.status_code == expired_post.status_code == 410 and "This link has expired" in expired.text


async def test_a_post_from_the_public_address_is_taken_as_the_browser_names_its_origin() -> None:
    # Written with capitals and the default port; a browser's Origin header has neither.
    async with running({"forms": form_server()}, public_url="HTTPS://Bridge.Example:443/chat") as site:
        with anyio.fail_after(patient(20)):
            card = await site.call("forms", "fill", {"schema": OK_SCHEMA})
            link = site.forms.link_for(card, ALICE)
            assert link is not None and link.startswith("HTTPS://Bridge.Example:443/chat/form/")
            # The reverse proxy in front of the bridge takes /chat off the path.
            sent = await post(site, site.base + "/form/" + link.split("/form/", 1)[1], [("f0", "on")],
                              Origin="https://bridge.example")
            assert sent.status_code == 200, sent.text
            outcome = await site.chat.wait_finished(card.id)
    assert outcome.status is Status.ACCEPTED


async def test_a_request_answered_in_chat_closes_its_web_link() -> None:
    async with running({"forms": form_server()}) as site:
        with anyio.fail_after(patient(20)):
            card = await site.call("forms", "fill", {"schema": OK_SCHEMA})
            url = site.link(card)
            await site.host.decide(DecisionIn(card.id, ALICE, "decline"))
            await site.chat.wait_finished(card.id)
            page, sent = await get(url), await post(site, url, [("f0", "on")])
    assert page.status_code == sent.status_code == 410
    assert "This request is no longer open" in page.text


@pytest.mark.parametrize(("body", "content_type"), [
    ("f0=on", "application/x-www-form-urlencoded"),  # no button pressed
    ("f0=on&action=explode", "application/x-www-form-urlencoded"),
    ("action=accept", "multipart/form-data; boundary=x"),
    ("action=accept&f0=" + "x" * 300_000, "application/x-www-form-urlencoded"),
    ("action=accept&f0=%ff", "application/x-www-form-urlencoded"),
])
async def test_a_post_that_is_not_our_form_gets_a_clear_page(body: str, content_type: str) -> None:
    async with running({"forms": form_server()}) as site:
        with anyio.fail_after(patient(20)):
            card = await site.call("forms", "fill", {"schema": OK_SCHEMA})
            async with httpx2.AsyncClient() as client:
                sent = await client.post(site.link(card), content=body.encode(),
                                         headers={"Content-Type": content_type})
    assert sent.status_code == 400 and "The form could not be read" in sent.text
    assert "Traceback" not in sent.text and card.id not in site.chat.finished


async def test_links_are_offered_only_with_a_public_address() -> None:
    class Door:
        async def open_anywhere(self, interaction_id: str) -> Any:
            return None

        async def decide(self, decision: DecisionIn) -> Any:
            raise AssertionError

    server = HttpServer("127.0.0.1:0", "https://bridge.example.org/chat/")
    assert web_forms(HttpConfig(listen="127.0.0.1:0"), server, Door()) is None
    assert web_forms(HttpConfig(public_url="https://bridge.example.org/chat"), None, Door()) is None
    forms = web_forms(HttpConfig(listen="127.0.0.1:0", public_url="https://bridge.example.org/chat",
                                 form_link_secret="x" * 32), server, Door())
    assert forms is not None and forms.links.lifetime == 900


def test_the_http_block_sets_the_link_lifetime_and_key() -> None:
    from bridge.config.file import from_mapping
    from bridge.errors import ConfigError

    base: dict[str, Any] = {"chat": {"console": {}}}
    assert from_mapping(base).http.form_link_lifetime == 900
    config = from_mapping({**base, "http": {"listen": ":8780", "public_url": "https://b.example.org",
                                            "form_link_lifetime": "5m", "form_link_secret": "${KEY}"}},
                          env={"KEY": "k" * 40})
    assert (config.http.form_link_lifetime, config.http.form_link_secret) == (300, "k" * 40)
    assert "k" * 40 not in repr(config.http)
    with pytest.raises(ConfigError, match=r"http\.form_link_secret"):
        from_mapping({**base, "http": {"form_link_secret": "short"}})


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_date_default_the_field_refuses_is_suggested_not_pre_filled(protocol: str) -> None:
    """An ISO week date is no RFC 3339 date: a browser's date input would drop it (and Python would rewrite
    `2026-W01-1T10:00:00Z` as 2025-12-29), so the page leaves the input empty and suggests it in the hint."""
    schema = json.dumps({"type": "object", "required": ["week"], "properties": {
        "week": {"type": "string", "format": "date", "title": "Week", "default": "2026-W01-1"},
        "at": {"type": "string", "format": "date-time", "title": "At", "default": "2026-W01-1T10:00:00Z"},
        "day": {"type": "string", "format": "date", "title": "Day", "default": "2026-01-31"}}})
    async with running({"forms": form_server()}, server_protocol=protocol) as site:
        with anyio.fail_after(patient(20)):
            card = await site.call("forms", "fill", {"schema": schema})
            url = site.link(card)
            page = await get(url)
            sent = await post(site, url, [("f0", "2026-01-05"), ("f2", "2026-01-31")])
            result = json.loads(await site.result("forms", "fill"))
    week, at, day = (page.text.split(f'id="f{i}-field"', 1)[1].split('class="field', 1)[0] for i in range(3))
    assert 'value=""' in week and "suggested: 2026-W01-1" in week
    assert "2025-12-29" not in at and "suggested: 2026-W01-1T10:00:00Z; date, time and UTC offset" in at
    assert 'value="2026-01-31"' in day and "suggested" not in day
    assert sent.status_code == 200
    assert result["content"] == {"week": "2026-01-05", "day": "2026-01-31"}
