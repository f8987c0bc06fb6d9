"""Web forms with two workers on one Postgres store, each serving HTTP with the same link key (a load balancer may
send the browser to either): a link made by the worker that posted the card is opened and submitted on the other,
the card is decided once and the call completes (both eras; a legacy decision reaches the worker holding its
session)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any
from unittest.mock import patch
from urllib.parse import urlsplit

import anyio
import pytest
from anyio.abc import TaskGroup

from bridge.door.model import DecisionIn, Status, Verdict
from bridge.web.forms import FormLinks, LinkClaims, WebForms
from bridge.web.server import HttpServer
from tests.bridge.test_workers import card_on
from tests.harness.hosts import ALICE, BOB, config_for, host_for, patient
from tests.servers.inline import form_server
from tests.storage.support import worker
from tests.webform.site import Clock, Site
from tests.webform.test_routes import get, post

pytestmark = pytest.mark.anyio

KEY = "k" * 40  # http.form_link_secret: the same on every worker, so any of them checks any link


@asynccontextmanager
async def two_sites(url: str, protocol: str) -> AsyncIterator[tuple[Site, Site]]:
    server = form_server()
    async with AsyncExitStack() as stack:
        sites = []
        for name in ("a", "b"):
            store = await stack.enter_async_context(worker(url, name))
            host, chat = await host_for(config_for({"forms": server}, server_protocol=protocol), store)
            http = HttpServer("127.0.0.1:0")
            clock = Clock()
            forms = WebForms(host, http, FormLinks(KEY, clock=clock))
            host.offer_web_forms(forms)
            await stack.enter_async_context(host)
            tg: TaskGroup = await stack.enter_async_context(anyio.create_task_group())
            await tg.start(http.serve)
            stack.callback(tg.cancel_scope.cancel)
            sites.append(Site(host, chat, forms, http, clock))
        yield sites[0], sites[1]


def on(site: Site, url: str) -> str:
    """The same link, as a load balancer would send it to `site`'s worker."""
    return site.base + urlsplit(url).path


@pytest.mark.parametrize("protocol", ["legacy", "auto"])
async def test_a_link_made_on_one_worker_is_answered_on_the_other_once(pg_url: str, protocol: str) -> None:
    async with two_sites(pg_url, protocol) as (a, b):
        heard = anyio.Event()
        answered = a.host.calls.rounds.answered

        async def heard_on_a(*args: Any) -> Any:
            try:
                return await answered(*args)
            finally:
                heard.set()

        with anyio.fail_after(patient(30)), patch.object(a.host.calls.rounds, "answered", heard_on_a):
            card = await card_on(a.host, a.chat)
            link = a.link(card)
            page = await get(on(b, link))
            refused = await post(b, on(b, link), [("f0", "seven")])
            still_open = await b.host.open_anywhere(card.id)
            sent = await post(b, on(b, link), [("f0", "7")])
            again = await post(b, on(b, link), [("f0", "8")])
            if protocol == "auto":
                # A parked card: a hears of b's claim through the store (b answers the post without waiting for it).
                await heard.wait()
            on_a = await get(link)
            # A legacy call goes on where its session is (a); a parked 2026 call where its last answer was claimed.
            done = await (a if protocol == "legacy" else b).chat.wait_message("forms.fill:")
            # The claim's winner finishes the card: a for a legacy card (the decision was forwarded to it), else b.
            finished = await (a if protocol == "legacy" else b).chat.wait_finished(card.id)
        audit = await a.host.store.audit_rows(card.id)
    assert page.status_code == 200 and 'name="f0"' in page.text
    assert refused.status_code == 422 and still_open == card  # checked on b, nothing decided
    assert sent.status_code == 200 and "Thanks — sent" in sent.text
    assert again.status_code == 410 and on_a.status_code == 410  # answered once, wherever the link is opened next
    assert json.loads(done.split("\n", 1)[1])["content"] == {"n": 7}
    assert (finished.status, finished.by) == (Status.ACCEPTED, ALICE)
    assert [(r.outcome, r.actor) for r in audit] == [("accepted", ALICE.key)]
    assert len(a.chat.finish_calls) + len(b.chat.finish_calls) == 1


async def test_a_link_opened_on_the_other_worker_is_still_only_for_its_person_and_its_open_card(
        pg_url: str) -> None:
    async with two_sites(pg_url, "legacy") as (a, b):
        with anyio.fail_after(patient(30)):
            card = await card_on(a.host, a.chat)
            link = a.link(card)
            stranger = a.forms.links.sign(LinkClaims(card.id, BOB, "n" * 22, card.expires_at))
            page = await get(b.base + "/form/" + stranger)
            assert (await a.host.decide(DecisionIn(card.id, ALICE, "decline"))).verdict is Verdict.CLAIMED
            await a.chat.wait_finished(card.id)
            ended = await get(on(b, link))
    assert page.status_code == 403 and "This link is not for you" in page.text
    assert ended.status_code == 410 and "no longer open" in ended.text
