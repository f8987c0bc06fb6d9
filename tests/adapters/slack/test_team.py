"""Team decisions end to end on Slack (the real bolt app against the fake Slack): two of three approvers by button,
one decline, the same person twice, strangers, grants by button, approvers reached in a DM, user groups, budgets."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from adapters.slack import ids
from bridge.config.file import LLMConfig
from bridge.config.team import ApproverRule, BudgetLimits, GrantScope, Group
from bridge.door.model import Actor, ConversationKey
from tests.adapters.slack import driver
from tests.adapters.slack.conftest import running_bridge
from tests.adapters.slack.inline_server import make_server
from tests.harness.hosts import patient
from tests.harness.slack import FakeSlack
from tests.llm.fake_llm_server import FakeLLMServer, Reply, openai_completion

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

TWO_OF_THREE = ApproverRule(("slack:U1", "slack:U2", "slack:U3"), required=2, requester=True)
ECHO = 'call inline echo {"message": "deploy"}'


def team(slack: FakeSlack) -> FakeSlack:
    slack.users.update({"U3": "Grace Hopper", "U9": "Stranger"})
    slack.members["C1"] = ["U1", "U2", "U3", "U9"]
    return slack


async def updated(slack: FakeSlack, card: driver.Card, text: str) -> str:
    call = await slack.wait_for_call("chat.update", lambda c: c.args["ts"] == card.ts and text in str(c.args))
    return json.dumps(call.args["blocks"])


async def ephemeral(slack: FakeSlack, user: str, text: str) -> None:
    await slack.wait_for_call("chat.postEphemeral", lambda c: c.args["user"] == user and text in c.args["text"])


async def result(slack: FakeSlack, thread: str) -> str:
    call = await slack.wait_for_call("chat.postMessage", lambda c: c.args.get("thread_ts") == thread
                                     and "inline.echo" in str(c.args.get("text")))
    return str(call.args["text"])


async def test_two_of_three_by_button_counts_people_once_and_refuses_strangers(slack: FakeSlack) -> None:
    async with running_bridge(team(slack), {"inline": make_server()}, server_tool_approvers=(("echo", TWO_OF_THREE),)) \
            as bridge:
        with anyio.fail_after(patient(15)):
            await driver.mention(slack, ECHO, "1800000000.000100")
            card = await driver.wait_card(slack, "1800000000.000100")
            assert card.actions() == [ids.ACCEPT, ids.DECLINE]  # no Edit, no grants on a quorum card
            assert "Needs 2 approvals from different people; 0 so far." in json.dumps(card.blocks)
            await driver.click(slack, card, ids.ACCEPT, user="U9")
            await ephemeral(slack, "U9", "Only the approvers named on it can answer this request.")
            await driver.click(slack, card, ids.ACCEPT, user="U1")
            progress = await updated(slack, card, "1 so far")
            await driver.click(slack, card, ids.ACCEPT, user="U1")
            await ephemeral(slack, "U1", "You have already approved this request")
            await driver.click(slack, card, ids.ACCEPT, user="U3")
            done = await result(slack, "1800000000.000100")
            final = await updated(slack, card, "Accepted by")
    assert "1 so far (<@U1>)" in progress and "May approve: <@U2> and <@U3>" in progress
    assert done.endswith("echo: deploy") and "Accepted by <@U1> and <@U3>" in final
    rows = await bridge.host.store.audit_rows(card.interaction_id)
    assert [(r.outcome, r.actor) for r in rows] == [("approved", "slack:U1"), ("accepted", "slack:U3")]


async def test_one_decline_by_button_ends_it(slack: FakeSlack) -> None:
    async with running_bridge(team(slack), {"inline": make_server()}, server_tool_approvers=(("echo", TWO_OF_THREE),)):
        with anyio.fail_after(patient(15)):
            await driver.mention(slack, ECHO, "1800000000.000200")
            card = await driver.wait_card(slack, "1800000000.000200")
            await driver.click(slack, card, ids.ACCEPT, user="U2")
            await updated(slack, card, "1 so far")
            await driver.click(slack, card, ids.DECLINE, user="U3")
            done = await result(slack, "1800000000.000200")
            final = await updated(slack, card, "Declined by")
    assert "was not run: declined by grace.hopper (after approvals by charles.babbage)" in done
    assert "Declined by <@U3> (after approvals by <@U2>)" in final


async def test_a_grant_by_button_runs_the_next_call_in_the_channel_until_it_expires(slack: FakeSlack) -> None:
    rule = ApproverRule(("slack:U2",), requester=True)
    async with running_bridge(team(slack), {"inline": make_server()}, server_tool_approvers=(("echo", rule),),
                              server_tool_grants=(GrantScope("channel", 3600.0),)) as bridge:
        now = [bridge.host.grants.clock()]
        bridge.host.grants.clock = lambda: now[0]
        with anyio.fail_after(patient(15)):
            await driver.mention(slack, ECHO, "1800000000.000300")
            card = await driver.wait_card(slack, "1800000000.000300")
            assert card.actions() == [ids.ACCEPT, ids.grant_action("channel"), ids.DECLINE]
            await driver.click(slack, card, ids.grant_action("channel"), user="U2")
            await result(slack, "1800000000.000300")
            await driver.mention(slack, ECHO, "1800000000.000400")  # another thread of the channel: no card
            await result(slack, "1800000000.000400")
            now[0] += 3601
            await driver.mention(slack, ECHO, "1800000000.000500")
            again = await driver.wait_card(slack, "1800000000.000500")
    assert again.interaction_id != card.interaction_id
    [used] = [r for r in await bridge.host.store.audit_rows() if r.outcome == "granted"]
    assert used.actor == "slack:U2" and "auto-approved by grant g" in used.detail
    assert not [c for c in slack.calls_to("chat.postMessage") if c.args.get("thread_ts") == "1800000000.000400"
                and c.args.get("blocks") and "actions" in json.dumps(c.args["blocks"])]


async def test_a_quorum_tool_is_never_auto_approved_by_a_grant(slack: FakeSlack) -> None:
    async with running_bridge(team(slack), {"inline": make_server()}, server_tool_approvers=(("echo", TWO_OF_THREE),),
                              server_tool_grants=(GrantScope("channel", None),)) as bridge:
        # A grant for the channel, as if given before the rule needed two people.
        await bridge.host.grants.give("tool", "inline", "echo", GrantScope("channel", None),
                                ConversationKey("slack", "T111", "C1", "x"), Actor("slack", "U1", "Ada"))
        with anyio.fail_after(patient(15)):
            await driver.mention(slack, ECHO, "1800000000.000600")
            card = await driver.wait_card(slack, "1800000000.000600")
    assert card.actions() == [ids.ACCEPT, ids.DECLINE]


async def test_an_approver_outside_the_thread_decides_in_a_dm_and_the_thread_card_closes(slack: FakeSlack) -> None:
    team(slack).members["C1"] = ["U1", "U2"]  # Grace is not in the channel
    rule = ApproverRule(("slack:U3",), requester=False)
    async with running_bridge(slack, {"inline": make_server()}, server_tool_approvers=(("echo", rule),)):
        with anyio.fail_after(patient(15)):
            await driver.mention(slack, ECHO, "1800000000.000700")
            card = await driver.wait_card(slack, "1800000000.000700")
            assert "Also asked privately: <@U3>." in json.dumps(card.blocks)
            call = await slack.wait_for_call("chat.postMessage", lambda c: c.args["channel"] == "DU3")
            dm = driver.Card(f"{card.interaction_id}~1", "DU3", call.response["ts"], call.args["blocks"])
            assert "Asked in <#C1>" in json.dumps(dm.blocks)
            await driver.click(slack, card, ids.ACCEPT, user="U1")  # the requester is not an approver here
            await ephemeral(slack, "U1", "Only")
            await driver.click(slack, dm, ids.ACCEPT, user="U3")
            await result(slack, "1800000000.000700")
            final = await updated(slack, card, "Accepted by <@U3>")
            await slack.wait_for_call("chat.update", lambda c: c.args["channel"] == "DU3")
    assert ":white_check_mark:" in final
    assert slack.calls_to("conversations.open")[0].args["users"] == "U3"


async def test_a_slack_user_group_decides(slack: FakeSlack) -> None:
    team(slack).usergroups["S0ONCALL"] = ["U3"]
    rule = ApproverRule(groups=("oncall",), requester=False)
    async with running_bridge(slack, {"inline": make_server()}, groups={"oncall": Group(slack_usergroup="S0ONCALL")},
                              server_tool_approvers=(("echo", rule),)):
        with anyio.fail_after(patient(15)):
            await driver.mention(slack, ECHO, "1800000000.000800")
            card = await driver.wait_card(slack, "1800000000.000800")
            await driver.click(slack, card, ids.ACCEPT, user="U2")
            await ephemeral(slack, "U2", "Only")
            await driver.click(slack, card, ids.ACCEPT, user="U3")
            await result(slack, "1800000000.000800")


async def test_a_budget_stops_the_agent_with_its_message_and_resets(slack: FakeSlack, llm: FakeLLMServer) -> None:
    llm.reply(Reply(body=openai_completion("first answer")), Reply(body=openai_completion("after midnight")))
    config: dict[str, Any] = {"llm": LLMConfig(provider="openai", model="gpt-test", api_key="sk-test",
                                               base_url=f"{llm.url}/v1"), "budgets": BudgetLimits(per_user=5)}
    async with running_bridge(team(slack), {}, **config) as bridge:
        now = [1_799_971_200.0 + 23 * 3600]  # 23:00 UTC
        bridge.host.budgets.clock = lambda: now[0]
        with anyio.fail_after(patient(15)):
            await driver.mention(slack, "hello", "1800000000.000900")
            await slack.wait_for_call("chat.postMessage", lambda c: c.args.get("text") == "first answer")
            await driver.mention(slack, "again", "1800000000.001000")
            stopped = await slack.wait_for_call("chat.postMessage", lambda c: "not asked" in str(c.args.get("text")))
            now[0] += 3600
            await driver.mention(slack, "and again", "1800000000.001100")
            await slack.wait_for_call("chat.postMessage", lambda c: c.args.get("text") == "after midnight")
    assert stopped.args["thread_ts"] == "1800000000.001000"
    assert stopped.args["text"] == ("The model was not asked: ada.lovelace's daily budget of 5 tokens is used up "
                                    "(7 today); it resets at 00:00 UTC, in 1 h 00 min.")
