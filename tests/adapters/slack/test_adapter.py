"""The adapter over real Socket Mode with an in-process server or interactions posted through the broker:
inline answers, approvals, editing and picking in modals, paged modals, long option lists, status lines, App Home,
direct messages and thread replies."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

import anyio
import pytest

from adapters.slack import ids
from bridge.door.forms import Form
from bridge.door.model import Interaction, Outcome, Status
from tests.adapters.slack import driver, limits
from tests.adapters.slack.conftest import Bridge, running_bridge
from tests.adapters.slack.inline_server import make_server
from tests.adapters.slack.interactions import ROOM, form, interaction, one_field, roots, sampling, tool_approval
from tests.harness.hosts import patient
from tests.harness.slack import APP_ID, TEAM_ID, FakeSlack, block_actions, event_callback, event_message_im

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

JSON = dict[str, Any]


@asynccontextmanager
async def asking(bridge: Bridge, card: Interaction) -> AsyncIterator[list[Outcome]]:
    """Ask `card` through the broker in a task; the list holds the outcome once the block exits."""
    outcomes: list[Outcome] = []

    async def ask() -> None:
        outcomes.append(await bridge.host.broker.ask(card))

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask)
        yield outcomes


async def test_a_single_boolean_is_answered_by_an_inline_button(slack: FakeSlack) -> None:
    # ctx.elicit is the legacy back-channel (the 2026 era would need a resolver-style tool)
    async with running_bridge(slack, {"inline": make_server()}, server_protocol="legacy"):
        with anyio.fail_after(patient(10)):
            await driver.mention(slack, "call inline confirm", "1800000000.000100")
            card = await driver.wait_card(slack, "1800000000.000100")
            assert card.actions() == ["mcp.choice.0", "mcp.choice.1", ids.DECLINE, ids.CANCEL]
            await driver.click(slack, card, "mcp.choice.1")
            result = await slack.wait_for_call("chat.postMessage", lambda c: "accepted" in str(c.args.get("text")))
    assert "accepted proceed=False" in result.args["text"]
    assert result.args["thread_ts"] == "1800000000.000100"


async def test_a_tool_call_is_approved_by_button(slack: FakeSlack) -> None:
    async with running_bridge(slack, {}) as bridge:
        with anyio.fail_after(patient(10)):
            async with asking(bridge, tool_approval()) as outcomes:
                card = await driver.wait_card(slack, ROOM.thread)
                assert card.actions() == [ids.ACCEPT, ids.DECLINE]
                await driver.click(slack, card, ids.ACCEPT)
            update = await slack.wait_for_call("chat.update", lambda c: c.args["ts"] == card.ts)
    assert outcomes[0].status is Status.ACCEPTED and outcomes[0].by is not None and outcomes[0].by.user_id == "U1"
    assert "Accepted by <@U1>" in str(update.args["blocks"])


async def test_a_sampling_request_is_approved_as_shown_or_edited_in_a_modal(slack: FakeSlack) -> None:
    async with running_bridge(slack, {}) as bridge:
        with anyio.fail_after(patient(10)):
            async with asking(bridge, sampling()) as shown:
                card = await driver.wait_card(slack, ROOM.thread)
                await driver.click(slack, card, ids.ACCEPT)
            async with asking(bridge, replace(sampling(), id="edit0001")) as edited:
                card = await _card(slack, "edit0001")
                view = await driver.open_form(slack, card)
                ack = await driver.submit(slack, view, driver.state(view, {"Prompt": "What is 7 × 6?"}))
    assert shown[0].status is Status.ACCEPTED and shown[0].content == {"prompt": "What is 6 × 7?"}
    assert "payload" not in ack or "response_action" not in ack["payload"]
    assert edited[0].content == {"prompt": "What is 7 × 6?"}


async def _card(slack: FakeSlack, interaction_id: str) -> driver.Card:
    call = await slack.wait_for_call("chat.postMessage", lambda c: interaction_id in str(c.args.get("blocks")))
    return driver.Card(interaction_id, call.response["channel"], call.response["ts"], call.args["blocks"])


async def test_roots_are_picked_in_a_modal(slack: FakeSlack) -> None:
    async with running_bridge(slack, {}) as bridge:
        with anyio.fail_after(patient(10)):
            async with asking(bridge, roots()) as outcomes:
                card = await driver.wait_card(slack, ROOM.thread)
                assert card.actions() == [ids.OPEN_FORM, ids.DECLINE]
                view = await driver.open_form(slack, card)
                await driver.submit(slack, view, driver.state(view, {"Folders": ["b"]}))
    assert outcomes[0].status is Status.ACCEPTED and outcomes[0].content == {"roots": ["file:///srv/b"]}


async def test_a_form_longer_than_one_modal_is_answered_page_by_page_without_losing_a_field(
        slack: FakeSlack) -> None:
    schema = {"type": "object", "properties": {f"q{i}": {"type": "string", "title": f"Question {i}"}
                                               for i in range(120)}}
    card_in = interaction(form=form(schema), id="paged001")
    async with running_bridge(slack, {}) as bridge:
        with anyio.fail_after(patient(10)):
            async with asking(bridge, card_in) as outcomes:
                card = await driver.wait_card(slack, ROOM.thread)
                view = await driver.open_form(slack, card)
                first = {f"Question {i}": f"answer {i}" for i in range(120)}
                ack = await driver.submit(slack, view, driver.state(view, first))
                assert ack["payload"]["response_action"] == "update"
                page_two = ack["payload"]["view"] | {"id": view["id"]}
                limits.check_modal(page_two)
                ack = await driver.submit(slack, page_two, driver.state(page_two, first))
    assert outcomes[0].content == {f"q{i}": f"answer {i}" for i in range(120)}


async def test_long_option_lists_are_searched_through_block_suggestions(slack: FakeSlack) -> None:
    values = [f"option-{i}" for i in range(150)]
    card_in = interaction(form=one_field({"type": "string", "enum": values}), id="long0001")
    async with running_bridge(slack, {}) as bridge:
        with anyio.fail_after(patient(10)):
            async with asking(bridge, card_in):
                card = await driver.wait_card(slack, ROOM.thread)
                view = await driver.open_form(slack, card)
                ack = await slack.send_envelope("interactive", {
                    "type": "block_suggestion", "user": {"id": "U1", "name": "u1", "team_id": TEAM_ID},
                    "team": {"id": TEAM_ID, "domain": "fake"}, "api_app_id": APP_ID, "token": "t",
                    "container": {"type": "view", "view_id": view["id"]}, "action_id": ids.FIELD_ACTION,
                    "block_id": ids.field_block(0), "value": "option-14", "view": view})
                await driver.submit(slack, view, {ids.field_block(0): {ids.FIELD_ACTION: {
                    "type": "external_select", "selected_option": ack["payload"]["options"][0]}}})
    assert [o["value"] for o in ack["payload"]["options"]] == ["14", "140", "141", "142", "143", "144", "145",
                                                              "146", "147", "148", "149"]


async def test_a_running_call_shows_a_status_line_with_a_stop_button(slack: FakeSlack) -> None:
    async with running_bridge(slack, {"inline": make_server()}):
        with anyio.fail_after(patient(10)):
            await driver.mention(slack, "call inline forever", "1800000000.000700")
            status = await slack.wait_for_call("chat.postMessage",
                                               lambda c: "stop" in str(c.args.get("blocks", "")).lower())
            stop = next(b for b in status.args["blocks"] if b["type"] == "actions")["elements"][0]
            payload = block_actions("U1", "C1", status.response["ts"], ids.STOP, stop["value"])
            await slack.send_envelope("interactive", payload)
            stopped = await slack.wait_for_call("chat.postMessage", lambda c: "Stopped" in str(c.args.get("text")))
            edited = await slack.wait_for_call("chat.update", lambda c: c.args["ts"] == status.response["ts"])
    assert "25% (1/4)" in status.args["text"]
    assert stopped.args["thread_ts"] == "1800000000.000700"
    assert "actions" not in str(edited.args["blocks"])


async def test_the_app_home_lists_what_waits_for_the_viewer(slack: FakeSlack) -> None:
    async with running_bridge(slack, {}) as bridge:
        with anyio.fail_after(patient(10)):
            async with asking(bridge, tool_approval()):
                card = await driver.wait_card(slack, ROOM.thread)
                opened = {"type": "app_home_opened", "user": "U1", "channel": "D1", "tab": "home",
                          "event_ts": f"{time.time():.6f}"}
                await slack.send_envelope("events_api", event_callback(opened))
                # The first publish may start before the card's reference is back from Slack; the card's own
                # refresh then follows with its link.
                published = await slack.wait_for_call("views.publish", lambda c: "Open the card" in str(c.args))
                await driver.click(slack, card, ids.DECLINE)
    view = published.args["view"]
    limits.check_home(view)
    assert f"/archives/C1/p{card.ts.replace('.', '')}|Open the card>" in str(view["blocks"])


async def test_direct_messages_and_replies_in_the_bot_s_thread_are_addressed_and_bot_messages_ignored(
        slack: FakeSlack) -> None:
    async with running_bridge(slack, {"inline": make_server()}):
        with anyio.fail_after(patient(10)):
            await slack.send_envelope("events_api", event_message_im("U1", "D1", "call inline echo {\"message\": "
                                                                     "\"from a DM\"}", "1800000000.000900"))
            dm = await slack.wait_for_call("chat.postMessage", lambda c: "from a DM" in str(c.args.get("text")))
            await driver.mention(slack, "servers", "1800000000.001000")
            await slack.wait_for_call("chat.postMessage", lambda c: c.args.get("thread_ts") == "1800000000.001000")
            reply = event_message_im("U1", "C1", "call inline echo {\"message\": \"in the thread\"}",
                                     "1800000000.001100", thread_ts="1800000000.001000")
            reply["event"]["channel_type"] = "channel"
            own = event_message_im("UBOT", "C1", "help", "1800000000.001200", thread_ts="1800000000.001000")
            own["event"] |= {"channel_type": "channel", "bot_id": "BBOT"}
            await slack.send_envelope("events_api", own)
            await slack.send_envelope("events_api", reply)
            threaded = await slack.wait_for_call("chat.postMessage",
                                                 lambda c: "in the thread" in str(c.args.get("text")))
    assert dm.args["channel"] == "D1" and not dm.args.get("thread_ts")
    assert threaded.args["thread_ts"] == "1800000000.001000"
    assert not [c for c in slack.calls_to("chat.postMessage") if "Commands" in str(c.args.get("text"))]


async def test_an_empty_form_is_accepted_by_its_button(slack: FakeSlack) -> None:
    async with running_bridge(slack, {}) as bridge:
        with anyio.fail_after(patient(10)):
            async with asking(bridge, interaction(form=Form(), accept_label="OK")) as outcomes:
                card = await driver.wait_card(slack, ROOM.thread)
                await driver.click(slack, card, ids.ACCEPT)
    assert outcomes[0].status is Status.ACCEPTED
