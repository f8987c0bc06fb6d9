"""Slack in HTTP mode with two workers on one Postgres store, behind a load balancer: the card is posted by one
worker, and the clicks and the modal's submission reach the other (signed requests sent to its own HTTP port).
"Fill in on the web" gives the clicker their private link there; "Fill in" opens the modal there, and its submission
there decides the card once and the call completes (both eras)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import aiohttp
import anyio
import pytest

from adapters.slack import ids
from bridge.safety.limits import Limits
from bridge.web.forms import FormLinks, WebForms
from bridge.web.server import HttpServer
from tests.adapters.slack import driver
from tests.adapters.slack.conftest import SIGNING_SECRET, Bridge, running_bridge, slack_settings
from tests.harness.hosts import patient
from tests.harness.slack import (
    EnvelopeType,
    FakeSlack,
    block_actions,
    check_http_ack,
    encode_http_body,
    sign_request,
    slash_command,
    view_closed,
    view_submission,
)
from tests.servers.inline import form_server
from tests.storage.support import worker

pytestmark = pytest.mark.anyio

SCHEMA = json.dumps({"type": "object", "properties": {"n": {"type": "integer", "title": "N"}}, "required": ["n"]})
KEY = "k" * 40


@asynccontextmanager
async def two_workers(slack: FakeSlack, url: str, protocol: str,
                      **overrides: Any) -> AsyncIterator[tuple[Bridge, Bridge]]:
    """Workers "a" and "b" in HTTP mode on one store, each with the bridge's HTTP server and web forms."""
    server = form_server()
    async with AsyncExitStack() as stack:
        bridges = []
        for name in ("a", "b"):
            store = await stack.enter_async_context(worker(url, name))
            bridge = await stack.enter_async_context(running_bridge(
                slack, {"forms": server}, settings=slack_settings(slack, mode="http"), store=store,
                server_protocol=protocol, **overrides))
            http = HttpServer("127.0.0.1:0")
            bridge.host.offer_web_forms(WebForms(bridge.host, http, FormLinks(KEY)))
            tg = await stack.enter_async_context(anyio.create_task_group())
            await tg.start(http.serve)
            stack.callback(tg.cancel_scope.cancel)
            bridges.append(bridge)
        yield bridges[0], bridges[1]


async def send(bridge: Bridge, type_: EnvelopeType, payload: dict[str, Any]) -> tuple[int, str]:
    """A signed request from Slack, as a load balancer delivers it to `bridge`'s worker."""
    body, content_type = encode_http_body(type_, payload)
    headers = sign_request(SIGNING_SECRET, body) | {"Content-Type": content_type}
    async with aiohttp.ClientSession() as http, http.post(bridge.adapter.http_url, data=body,
                                                           headers=headers) as response:
        text = await response.text()
    check_http_ack(text)
    return response.status, text


async def card_on(slack: FakeSlack, a: Bridge) -> driver.Card:
    command = slash_command("U1", "C1", f"call forms fill {json.dumps({'schema': SCHEMA})}",
                            response_url=slack.response_url)
    assert (await send(a, "slash_commands", command))[0] == 200
    card = await driver.wait_card(slack)
    await a.host.broker.wait_open(card.interaction_id)
    return card


def click(card: driver.Card, action_id: str, user: str = "U1") -> dict[str, Any]:
    return block_actions(user, card.channel, card.ts, action_id, card.interaction_id,
                         block_id=f"{card.interaction_id}.act")


async def test_the_web_link_click_on_the_other_worker_gets_the_clicker_a_link(slack: FakeSlack, pg_url: str) -> None:
    async with two_workers(slack, pg_url, "legacy") as (a, b):
        with anyio.fail_after(patient(30)):
            card = await card_on(slack, a)
            assert b.host.open_interaction(card.interaction_id) is None  # held by a only
            assert (await send(b, "interactive", click(card, ids.WEB_FORM)))[0] == 200
            private = await slack.wait_for_call("chat.postEphemeral", lambda c: c.args["user"] == "U1"
                                                and "/form/" in str(c.args.get("text")))
            assert (await send(b, "interactive", click(card, ids.WEB_FORM, user="U2")))[0] == 200
            refusal = await slack.wait_for_call("chat.postEphemeral", lambda c: c.args["user"] == "U2")
    assert "/form/" in private.args["text"] and "Open the form" in private.args["text"]
    assert refusal.args["text"] == "Only ada.lovelace can answer this request."


@pytest.mark.parametrize("protocol", ["legacy", "auto"])
async def test_a_modal_opened_and_submitted_on_the_other_worker_decides_once(
        slack: FakeSlack, pg_url: str, protocol: str) -> None:
    async with two_workers(slack, pg_url, protocol) as (a, b):
        with anyio.fail_after(patient(30)):
            card = await card_on(slack, a)
            assert (await send(b, "interactive", click(card, ids.OPEN_FORM)))[0] == 200
            opened = await slack.wait_for_call("views.open")
            view = opened.response["view"]
            wrong = view_submission("U1", view["id"], view["callback_id"], view["private_metadata"],
                                    driver.state(view, {"N": "seven"}), blocks=view["blocks"])
            status, refused = await send(b, "interactive", wrong)
            right = view_submission("U1", view["id"], view["callback_id"], view["private_metadata"],
                                    driver.state(view, {"N": "7"}), blocks=view["blocks"])
            status_right, accepted = await send(b, "interactive", right)
            done = await slack.wait_for_call("chat.postMessage", lambda c: "forms.fill" in str(c.args.get("text")))
            final = await slack.wait_for_call("chat.update", lambda c: c.args["ts"] == card.ts)
        audit = await a.host.store.audit_rows(card.interaction_id)
    assert status == 200 and json.loads(refused)["response_action"] == "errors"
    assert status_right == 200 and accepted in ("", "{}")  # the modal closes
    assert json.loads(str(done.args["text"]).split("\n", 1)[1].strip("`\n"))["content"] == {"n": 7}
    assert "Accepted by <@U1>" in json.dumps(final.args["blocks"])
    assert [(r.outcome, r.actor) for r in audit] == [("accepted", "slack:U1")]


async def test_a_modal_closed_on_the_other_worker_cancels_the_request(slack: FakeSlack, pg_url: str) -> None:
    async with two_workers(slack, pg_url, "legacy") as (a, b):
        with anyio.fail_after(patient(30)):
            card = await card_on(slack, a)
            assert (await send(b, "interactive", click(card, ids.OPEN_FORM)))[0] == 200
            view = (await slack.wait_for_call("views.open")).response["view"]
            closed = view_closed("U1", view["id"], view["callback_id"], view["private_metadata"])
            assert (await send(b, "interactive", closed))[0] == 200
            final = await slack.wait_for_call("chat.update", lambda c: c.args["ts"] == card.ts)
        audit = await a.host.store.audit_rows(card.interaction_id)
    assert "Cancelled by <@U1>" in json.dumps(final.args["blocks"])
    assert [(r.outcome, r.actor) for r in audit] == [("cancelled", "slack:U1")]


async def test_a_paged_modal_goes_on_whichever_worker_takes_each_page(slack: FakeSlack, pg_url: str) -> None:
    schema = json.dumps({"type": "object", "properties": {f"q{i}": {"type": "string", "title": f"Q{i}"}
                                                          for i in range(95)}, "required": ["q0"]})
    answers = {f"Q{i}": f"a{i}" for i in range(95)}
    async with two_workers(slack, pg_url, "legacy", limits=Limits(schema_fields=100)) as (a, b):
        with anyio.fail_after(patient(30)):
            command = slash_command("U1", "C1", f"call forms fill {json.dumps({'schema': schema})}",
                                    response_url=slack.response_url)
            assert (await send(a, "slash_commands", command))[0] == 200
            card = await driver.wait_card(slack)
            await a.host.broker.wait_open(card.interaction_id)
            assert (await send(b, "interactive", click(card, ids.OPEN_FORM)))[0] == 200
            first = (await slack.wait_for_call("views.open")).response["view"]
            # Page 1 on b, page 2 on a: the earlier answers travel with the view.
            _, next_page = await send(b, "interactive", view_submission(
                "U1", first["id"], first["callback_id"], first["private_metadata"], driver.state(first, answers),
                blocks=first["blocks"]))
            second = json.loads(next_page)["view"] | {"id": first["id"]}
            status, closed = await send(a, "interactive", view_submission(
                "U1", second["id"], second["callback_id"], second["private_metadata"], driver.state(second, answers),
                blocks=second["blocks"]))
            done = await slack.wait_for_call("chat.postMessage", lambda c: "forms.fill" in str(c.args.get("text")))
    assert "(2/2)" in second["title"]["text"] and status == 200 and closed in ("", "{}")
    assert json.loads(str(done.args["text"]).split("\n", 1)[1].strip("`\n"))["content"] == \
        {f"q{i}": f"a{i}" for i in range(95)}
