"""Forms at the edges of what Block Kit takes still open as Slack modals and are answered: a number limit beyond any
float (a 401-digit maximum), date and date-time defaults no picker can show."""

from __future__ import annotations

import json

import anyio
import pytest

from bridge.door.model import Status
from tests.adapters.slack import driver
from tests.adapters.slack.conftest import running_bridge
from tests.adapters.slack.interactions import ROOM, form, interaction
from tests.adapters.slack.test_adapter import asking
from tests.harness.hosts import patient
from tests.harness.slack import FakeSlack
from tests.servers.inline import form_server

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]


async def test_a_401_digit_maximum_opens_a_modal(slack: FakeSlack) -> None:
    schema = {"type": "object", "required": ["n"], "properties": {
        "n": {"type": "integer", "title": "How many", "minimum": 1, "maximum": 10**400}}}
    async with running_bridge(slack, {}) as bridge:
        with anyio.fail_after(patient(10)):
            async with asking(bridge, interaction(form=form(schema), id="huge0001")) as outcomes:
                card = await driver.wait_card(slack, ROOM.thread)
                view = await driver.open_form(slack, card)
                [element] = [b["element"] for b in view["blocks"] if b["type"] == "input"]
                assert element["type"] == "number_input" and element["min_value"] == "1"
                assert "max_value" not in element
                await driver.submit(slack, view, driver.state(view, {"How many": "7"}))
    assert outcomes[0].status is Status.ACCEPTED and outcomes[0].content == {"n": 7}


DATES = {"type": "object", "required": ["week"], "properties": {
    "landing": {"type": "string", "format": "date-time", "title": "Landing", "default": "1969-07-20T20:17:40Z",
                "description": "UTC"},
    "end": {"type": "string", "format": "date-time", "title": "End", "default": "9999-12-31T23:59:59Z"},
    "week": {"type": "string", "format": "date", "title": "Week", "default": "2026-W01-1"},
    "day": {"type": "string", "format": "date", "title": "Day", "default": "2026-01-31"},
    "at": {"type": "string", "format": "date-time", "title": "At", "default": "2026-01-31T09:30:00Z"},
}}


@pytest.mark.parametrize("protocol", ["legacy", "auto"])
async def test_date_defaults_no_picker_can_show_are_hints_and_the_modal_opens(slack: FakeSlack, protocol: str) -> None:
    """Before 1970, past Slack's ten digits of UNIX seconds, or an ISO week date: Slack refuses a view that
    pre-fills them (the fake checks every view with slack_sdk's models), so the picker starts empty and the hint
    suggests the server's value; defaults that fit are still pre-filled."""
    async with running_bridge(slack, {"forms": form_server()}, server_protocol=protocol):
        with anyio.fail_after(patient(20)):
            await driver.mention(slack, f"call forms fill {json.dumps({'schema': json.dumps(DATES)})}",
                                 "1800000000.000100")
            card = await driver.wait_card(slack, "1800000000.000100")
            view = await driver.open_form(slack, card)
            blocks = {b["label"]["text"]: b for b in view["blocks"] if b["type"] == "input"}
            await driver.submit(slack, view, driver.state(view, {"Week": "2026-01-05"}))
            done = await slack.wait_for_call("chat.postMessage", lambda c: "forms.fill" in str(c.args.get("text")))
    hints = {label: b.get("hint", {}).get("text") for label, b in blocks.items()}
    assert hints == {"Landing": "Suggested: 1969-07-20T20:17:40Z. UTC", "End": "Suggested: 9999-12-31T23:59:59Z.",
                     "Week": "Suggested: 2026-W01-1.", "Day": None, "At": None}
    assert [k for k in ("Landing", "End", "Week") if "initial_date" in blocks[k]["element"]
            or "initial_date_time" in blocks[k]["element"]] == []
    assert blocks["Day"]["element"]["initial_date"] == "2026-01-31"
    assert blocks["At"]["element"]["initial_date_time"] == 1769851800
    result = json.loads(str(done.args["text"]).split("\n", 1)[1].strip("`\n"))
    assert result["action"] == "accept"
    assert result["content"] == {"week": "2026-01-05", "day": "2026-01-31", "at": "2026-01-31T09:30:00Z"}
