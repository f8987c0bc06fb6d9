"""Tool calls running as tasks in Slack (the fake Slack over real Socket Mode), against server-everything's
`simulate-research-query`: one status message per task, edited once per status change, with a Stop button that
cancels the task at the server; the clarifying question tied to the task is an ordinary card answered in a modal."""

from __future__ import annotations

import anyio
import pytest

from adapters.slack import ids
from bridge.config.file import ServerConfig
from tests.adapters.slack import driver
from tests.adapters.slack.conftest import running_bridge
from tests.harness.hosts import patient
from tests.harness.slack import Call, FakeSlack, block_actions

pytestmark = [pytest.mark.anyio]


def is_status(call: Call) -> bool:
    return call.ok and "simulate-research-query" in str(call.args.get("text", "")) and "task " in str(
        call.args.get("text", ""))


async def test_a_research_task_is_one_status_message_edited_per_change_then_its_result(
        slack: FakeSlack, everything: ServerConfig) -> None:
    async with running_bridge(slack, {"everything": everything}):
        with anyio.fail_after(patient(30)):
            await driver.mention(slack, 'call everything simulate-research-query {"topic": "tides"}',
                                 "1800000000.000100")
            status = await slack.wait_for_call("chat.postMessage", is_status)
            await slack.wait_for_call("chat.postMessage", lambda c: "# Research Report: tides" in str(c.args))
            final = await slack.wait_for_call("chat.update", lambda c: c.args["ts"] == status.response["ts"]
                                              and "task completed" in str(c.args.get("text")))
    posts = [c for c in slack.calls_to("chat.postMessage") if is_status(c)]
    edits = [c.args["text"] for c in slack.calls_to("chat.update") if c.args["ts"] == status.response["ts"]]
    assert len(posts) == 1 and status.args["thread_ts"] == "1800000000.000100"
    assert len(edits) == len(set(edits)) and 3 <= len(edits) <= 6, edits  # one edit per change
    assert sum("task working: " in e for e in edits) >= 2
    assert "actions" not in str(final.args["blocks"])  # no Stop once it ended
    assert any(b["type"] == "actions" for b in status.args["blocks"])  # Stop while it runs


async def test_the_clarifying_question_is_a_card_of_the_task_answered_in_a_modal(
        slack: FakeSlack, everything: ServerConfig) -> None:
    async with running_bridge(slack, {"everything": everything}):
        with anyio.fail_after(patient(30)):
            await driver.mention(slack, 'call everything simulate-research-query {"topic": "python", '
                                        '"ambiguous": true}', "1800000000.000200")
            card = await driver.wait_card(slack, "1800000000.000200")
            waiting = await slack.wait_for_call("chat.update", lambda c: "task waiting for an answer from "
                                                in str(c.args.get("text")))
            view = await driver.open_form(slack, card)
            await driver.submit(slack, view, driver.state(view, {"Clarification": "Python snake species"}))
            report = await slack.wait_for_call("chat.postMessage", lambda c: "# Research Report" in str(c.args))
    assert "Task" in str(card.blocks) and "simulate-research-query (task " in str(card.blocks)
    assert "task waiting for an answer from ada.lovelace: Found multiple interpretations" in waiting.args["text"]
    assert "python (snake)" in str(report.args)


async def test_stop_cancels_the_task_at_the_server_and_says_what_it_answered(
        slack: FakeSlack, everything: ServerConfig) -> None:
    async with running_bridge(slack, {"everything": everything}):
        with anyio.fail_after(patient(30)):
            await driver.mention(slack, 'call everything simulate-research-query {"topic": "tides"}',
                                 "1800000000.000300")
            status = await slack.wait_for_call("chat.postMessage", is_status)
            stop = next(b for b in status.args["blocks"] if b["type"] == "actions")["elements"][0]
            await slack.send_envelope("interactive", block_actions("U1", "C1", status.response["ts"], ids.STOP,
                                                                   stop["value"]))
            said = await slack.wait_for_call("chat.postMessage", lambda c: "Stopped" in str(c.args.get("text")))
            ended = await slack.wait_for_call("chat.update", lambda c: c.args["ts"] == status.response["ts"]
                                              and "task cancelled" in str(c.args.get("text")))
    assert "the server reports the task cancelled (Client cancelled task execution.)" in said.args["text"]
    assert "(stopped by " in ended.args["text"] and "actions" not in str(ended.args["blocks"])
