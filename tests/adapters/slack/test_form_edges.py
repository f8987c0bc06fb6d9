"""A form whose number limit is beyond any float (a 401-digit maximum) still opens as a Slack modal and is answered."""

from __future__ import annotations

import anyio
import pytest

from bridge.model import Status
from tests.adapters.slack import driver
from tests.adapters.slack.conftest import running_bridge
from tests.adapters.slack.interactions import ROOM, form, interaction
from tests.adapters.slack.test_adapter import asking
from tests.slackfake import FakeSlack

pytestmark = pytest.mark.anyio


async def test_a_401_digit_maximum_opens_a_modal(slack: FakeSlack) -> None:
    schema = {"type": "object", "required": ["n"], "properties": {
        "n": {"type": "integer", "title": "How many", "minimum": 1, "maximum": 10**400}}}
    async with running_bridge(slack, {}) as bridge:
        with anyio.fail_after(10):
            async with asking(bridge, interaction(form=form(schema), id="huge0001")) as outcomes:
                card = await driver.wait_card(slack, ROOM.thread)
                view = await driver.open_form(slack, card)
                [element] = [b["element"] for b in view["blocks"] if b["type"] == "input"]
                assert element["type"] == "number_input" and element["min_value"] == "1"
                assert "max_value" not in element
                await driver.submit(slack, view, driver.state(view, {"How many": "7"}))
    assert outcomes[0].status is Status.ACCEPTED and outcomes[0].content == {"n": 7}
