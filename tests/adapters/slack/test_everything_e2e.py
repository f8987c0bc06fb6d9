"""End to end over real Socket Mode: a person in the fake Slack answers server-everything's elicitation form.

The bridge runs as in production (bolt AsyncApp, AsyncSocketModeHandler, slack_sdk client) against FakeSlack;
server-everything runs over stdio and reports the exact content it received in its `Raw result`.
"""

from __future__ import annotations

import anyio
import pytest

from adapters.slack import ids
from bridge.config.file import ServerConfig
from tests.adapters.slack import driver
from tests.adapters.slack.conftest import running_bridge
from tests.harness.hosts import patient
from tests.harness.slack import FakeSlack

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

CALL = "call everything trigger-elicitation-request"
ANSWERS = {
    "String": "Ada Lovelace",
    "Boolean": True,
    "String with email format": "ada@example.com",
    "String with uri format": "https://example.com/ada",
    "String with date format": "1815-12-10",
    "Integer": 7,
    "Number in range 1-1000": 2.5,
    "Untitled Single Select Enum": "Ross",
    "Untitled Multiple Select Enum": ["Piano", "Drums"],
    "Titled Single Select Enum": "Wonder Woman",
    "Titled Multiple Select Enum": ["Salmon", "Trout"],
    "Legacy Titled Single Select Enum": "Dogs",
}


async def test_a_form_is_filled_in_a_modal_and_the_server_gets_exactly_the_typed_values(
        slack: FakeSlack, everything: ServerConfig) -> None:
    async with running_bridge(slack, {"everything": everything}):
        with anyio.fail_after(patient(30)):
            await driver.mention(slack, CALL, "1800000000.000100")
            card = await driver.wait_card(slack, "1800000000.000100")
            assert card.actions() == [ids.OPEN_FORM, ids.DECLINE, ids.CANCEL]
            view = await driver.open_form(slack, card)

            bad = driver.state(view, ANSWERS | {"String with email format": "not-an-email"})
            ack = await driver.submit(slack, view, bad)
            email_block = next(b["block_id"] for b in view["blocks"]
                               if b.get("label", {}).get("text") == "String with email format")
            assert ack["payload"] == {"response_action": "errors",
                                      "errors": {email_block: "enter an email address like name@example.com"}}

            ack = await driver.submit(slack, view, driver.state(view, ANSWERS))
            assert "response_action" not in ack.get("payload", {})
            result = await driver.raw_result(slack, "1800000000.000100")
            update = await slack.wait_for_call("chat.update", lambda c: c.args["ts"] == card.ts)

    assert result == {"action": "accept", "content": {
        "name": "Ada Lovelace", "check": True, "firstLine": "It was a dark and stormy night.",
        "email": "ada@example.com", "homepage": "https://example.com/ada", "birthdate": "1815-12-10",
        "integer": 7, "number": 2.5, "untitledSingleSelectEnum": "Ross",
        "untitledMultipleSelectEnum": ["Piano", "Drums"], "titledSingleSelectEnum": "hero-3",
        "titledMultipleSelectEnum": ["fish-2", "fish-3"], "legacyTitledEnum": "pet-2"}}
    assert isinstance(result["content"]["integer"], int) and isinstance(result["content"]["number"], float)
    final = str(update.args["blocks"])
    assert "Accepted by <@U1>" in final and "actions" not in final
    assert not slack.calls_to("views.update")  # the modal closed itself with the plain ack


@pytest.mark.parametrize("action", [ids.DECLINE, ids.CANCEL])
async def test_decline_and_cancel_by_button(slack: FakeSlack, everything: ServerConfig, action: str) -> None:
    async with running_bridge(slack, {"everything": everything}):
        with anyio.fail_after(patient(30)):
            await driver.mention(slack, CALL, "1800000000.000200")
            card = await driver.wait_card(slack, "1800000000.000200")
            ack = await driver.click(slack, card, action)
            result = await driver.raw_result(slack, "1800000000.000200")
            update = await slack.wait_for_call("chat.update", lambda c: c.args["ts"] == card.ts)
    assert list(ack) == ["envelope_id"]  # a plain ack, at once
    expected = "decline" if action == ids.DECLINE else "cancel"
    assert result == {"action": expected}
    shown = {"decline": "Declined by <@U1>", "cancel": "Cancelled by <@U1>"}[expected]
    assert shown in str(update.args["blocks"])


async def test_closing_the_modal_cancels(slack: FakeSlack, everything: ServerConfig) -> None:
    async with running_bridge(slack, {"everything": everything}):
        with anyio.fail_after(patient(30)):
            await driver.mention(slack, CALL, "1800000000.000300")
            card = await driver.wait_card(slack, "1800000000.000300")
            view = await driver.open_form(slack, card)
            await driver.close(slack, view)
            result = await driver.raw_result(slack, "1800000000.000300")
    assert result == {"action": "cancel"}


async def test_expiry_updates_the_card_and_replaces_the_open_modal(slack: FakeSlack,
                                                                  everything: ServerConfig) -> None:
    async with running_bridge(slack, {"everything": everything}, server_elicitation_timeout=2.0):
        with anyio.fail_after(patient(30)):
            await driver.mention(slack, CALL, "1800000000.000400")
            card = await driver.wait_card(slack, "1800000000.000400")
            view = await driver.open_form(slack, card)
            replaced = await slack.wait_for_call("views.update", lambda c: c.args["view_id"] == view["id"])
            update = await slack.wait_for_call("chat.update", lambda c: c.args["ts"] == card.ts)
            result = await driver.raw_result(slack, "1800000000.000400")
            late = await driver.submit(slack, view, driver.state(view, ANSWERS))
    assert result == {"action": "cancel"}
    assert ":hourglass: Expired" in str(update.args["blocks"])
    assert replaced.args["view"]["callback_id"] == ids.CLOSED_CALLBACK and "Expired" in str(replaced.args["view"])
    assert late["payload"]["response_action"] == "update"  # a late submission only sees the ended view


async def test_a_stranger_is_refused_privately_and_a_duplicate_click_changes_nothing(
        slack: FakeSlack, everything: ServerConfig) -> None:
    async with running_bridge(slack, {"everything": everything}):
        with anyio.fail_after(patient(30)):
            await driver.mention(slack, CALL, "1800000000.000500")
            card = await driver.wait_card(slack, "1800000000.000500")
            await driver.click(slack, card, ids.DECLINE, user="U2")
            refusal = await slack.wait_for_call("chat.postEphemeral")
            assert not [c for c in slack.calls_to("chat.update") if c.args["ts"] == card.ts]  # still open
            await driver.click(slack, card, ids.OPEN_FORM, user="U2")
            second = await slack.wait_for_call("chat.postEphemeral",
                                               lambda c: c is not refusal and c.args["user"] == "U2")

            await driver.click(slack, card, ids.DECLINE)
            result = await driver.raw_result(slack, "1800000000.000500")
            await slack.wait_for_call("chat.update", lambda c: c.args["ts"] == card.ts)
            await driver.click(slack, card, ids.ACCEPT)
            late = await slack.wait_for_call("chat.postEphemeral", lambda c: c.args["user"] == "U1")
    assert (refusal.args["user"], refusal.args["channel"]) == ("U2", "C1")
    assert refusal.args["text"] == "Only ada.lovelace can answer this request."  # Slack display name
    assert second.args["text"] == refusal.args["text"] and not slack.calls_to("views.open")
    assert result == {"action": "decline"}
    assert late.args["text"] == "That request was already declined by ada.lovelace."
    assert len([c for c in slack.calls_to("chat.update") if c.args["ts"] == card.ts]) == 1
