"""server-everything's async elicitation and sampling (requests the server sends as tasks, then polls for) answered in
the fake Slack over real Socket Mode, after the server has polled several times."""

from __future__ import annotations

import anyio
import pytest

from adapters.slack import ids
from bridge.config.file import ServerConfig
from tests.adapters.slack import driver
from tests.adapters.slack.conftest import running_bridge
from tests.harness.hosts import patient
from tests.harness.slack import FakeSlack
from tests.servers.task_asker import task_asker

pytestmark = [pytest.mark.anyio]

POLLS = 3


async def test_an_async_elicitation_is_answered_in_a_modal_after_several_polls(
        slack: FakeSlack, everything: ServerConfig) -> None:
    thread = "1800000000.000900"
    async with running_bridge(slack, {"everything": everything}) as bridge:
        with anyio.fail_after(patient(45)):
            await driver.mention(slack, "call everything trigger-elicitation-request-async", thread)
            card = await driver.wait_card(slack, thread)
            await bridge.host.served_tasks.wait_polls(POLLS)
            view = await driver.open_form(slack, card)
            answers = {"Your Name": "Ada Lovelace", "Favorite Color": "Purple", "Terms Agreement": True}
            await driver.submit(slack, view, driver.state(view, answers))
            result = await driver.raw_result(slack, thread)
            update = await slack.wait_for_call("chat.update", lambda c: c.args["ts"] == card.ts)
    assert result["action"] == "accept"
    assert result["content"] == {"name": "Ada Lovelace", "favoriteColor": "Purple", "agreeToTerms": True}
    assert result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"]
    assert "Asked as a task" in str(card.blocks)
    assert "Accepted by <@U1>" in str(update.args["blocks"])


async def test_an_async_sampling_request_is_approved_and_written_after_several_polls(
        slack: FakeSlack, everything: ServerConfig) -> None:
    thread = "1800000000.000901"
    async with running_bridge(slack, {"everything": everything}) as bridge:
        with anyio.fail_after(patient(45)):
            await driver.mention(slack, 'call everything trigger-sampling-request-async {"prompt": "2+2?"}', thread)
            approval = await driver.wait_card(slack, thread)
            await bridge.host.served_tasks.wait_polls(POLLS)
            await driver.click(slack, approval, ids.ACCEPT)
            review = await slack.wait_for_call(
                "chat.postMessage", lambda c: c.args.get("thread_ts") == thread and "write the answer"
                in str(c.args.get("blocks")))
            card = driver.Card(next(b for b in review.args["blocks"] if b["type"] == "actions")["elements"][0]
                               ["value"], review.response["channel"], review.response["ts"], review.args["blocks"])
            view = await driver.open_form(slack, card)
            await driver.submit(slack, view, driver.state(view, {"Your answer": "4"}))
            done = await slack.wait_for_call(
                "chat.postMessage", lambda c: c.args.get("thread_ts") == thread
                and "Async sampling completed" in str(c.args.get("text")))
    text = str(done.args["text"])
    assert "input_required - waiting for a person to answer" in text
    assert "completed - answered" in text and '"text": "4"' in text


async def test_a_denied_async_sampling_request_fails_its_task(slack: FakeSlack, everything: ServerConfig) -> None:
    thread = "1800000000.000902"
    async with running_bridge(slack, {"everything": everything}) as bridge:
        with anyio.fail_after(patient(45)):
            await driver.mention(slack, 'call everything trigger-sampling-request-async {"prompt": "2+2?"}', thread)
            approval = await driver.wait_card(slack, thread)
            await bridge.host.served_tasks.wait_polls(1)
            await driver.click(slack, approval, ids.DECLINE)
            done = await slack.wait_for_call(
                "chat.postMessage",
                lambda c: c.args.get("thread_ts") == thread and "[FAILED]" in str(c.args.get("text")))
    assert "User rejected sampling request (a person said no)" in str(done.args["text"])


async def test_a_task_the_server_cancels_ends_its_card_saying_so(slack: FakeSlack) -> None:
    thread = "1800000000.000903"
    async with running_bridge(slack, {"tasks": task_asker()}, server_protocol="legacy"):
        with anyio.fail_after(patient(45)):
            await driver.mention(slack, 'call tasks ask_task {"cancel_after_polls": 2}', thread)
            card = await driver.wait_card(slack, thread)
            update = await slack.wait_for_call("chat.update", lambda c: c.args["ts"] == card.ts)
            done = await slack.wait_for_call(
                "chat.postMessage", lambda c: c.args.get("thread_ts") == thread and "tasks.ask_task" in str(
                    c.args.get("text")))
    final = str(update.args["blocks"])
    assert "the server cancelled its request" in final, final
    assert "actions" not in final
    assert '"cancel": "cancelled"' in str(done.args["text"]).replace("&quot;", '"')
