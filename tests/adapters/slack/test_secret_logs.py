"""At `--log-level debug`, what a person types into a Slack modal does not reach the log: Slack's SDK and Bolt log
whole requests and events at debug level, so the bridge keeps them at info."""

from __future__ import annotations

import io
import logging

import anyio
import pytest

from bridge.door.model import Status
from tests.adapters.slack import driver
from tests.adapters.slack.conftest import running_bridge
from tests.adapters.slack.interactions import ROOM, interaction, one_field
from tests.adapters.slack.test_adapter import asking
from tests.harness.hosts import patient
from tests.harness.slack import FakeSlack

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]


async def test_a_modal_submission_is_not_logged_at_debug_level(slack: FakeSlack, debug_logs: io.StringIO) -> None:
    card_in = interaction(form=one_field({"type": "string", "title": "Favourite colour"}), id="colour01")
    async with running_bridge(slack, {}) as bridge:
        with anyio.fail_after(patient(10)):
            async with asking(bridge, card_in) as outcomes:
                card = await driver.wait_card(slack, ROOM.thread)
                view = await driver.open_form(slack, card)
                await driver.submit(slack, view, driver.state(view, {"Favourite colour": "vermilion-octopus"}))
    assert outcomes[0].status is Status.ACCEPTED and outcomes[0].content == {"answer": "vermilion-octopus"}
    assert logging.getLogger().isEnabledFor(logging.DEBUG)
    assert not logging.getLogger("slack_bolt.App").isEnabledFor(logging.DEBUG)
    assert "vermilion-octopus" not in debug_logs.getvalue()
