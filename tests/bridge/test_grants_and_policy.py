"""Grants, channel policy and token budgets on the core, both eras where a server is involved."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
import trio.testing

from bridge.config.file import Config, SamplingPolicy
from bridge.config.team import ApproverRule, BudgetLimits, ChannelPolicy, GrantScope
from bridge.door.model import ConversationKey, DecisionIn, MessageIn
from bridge.host import Host
from bridge.llm import HumanProvider, LLMProvider, OpenAIProvider
from bridge.requests.grants import Grants
from bridge.storage import open_store
from tests.harness.hosts import ALICE, BOB, ROOM, FakeChatPort, config_for, patient
from tests.llm.fake_llm_server import FakeLLMServer, Reply, openai_completion
from tests.servers.features import Observed, features_server
from tests.servers.inline import form_server

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

ERAS = ["legacy", "auto"]
OTHER_THREAD = ConversationKey("test", "W1", "C1", "T2")
OTHER_CHANNEL = ConversationKey("test", "W1", "C9", "T1")
GRANTS = (GrantScope("conversation", 3600.0), GrantScope("channel", None))


@asynccontextmanager
async def bridge(protocol: str = "legacy", provider: LLMProvider | None = None, config: dict[str, Any] | None = None,
                 **server_fields: Any) -> AsyncIterator[tuple[Host, FakeChatPort, Observed]]:
    server, seen = features_server()
    cfg = config_for({"feat": server, "forms": form_server()}, server_protocol=protocol, **(config or {}),
                     **{f"server_{k}": v for k, v in server_fields.items()})
    chat = FakeChatPort()
    host = Host(cfg, await open_store(":memory:"), llm=provider or HumanProvider())
    host.attach(chat)
    async with host:
        yield host, chat, seen


async def say(host: Host, text: str, where: ConversationKey = ROOM, explicit: bool = True) -> None:
    await host.handle_message(MessageIn(where, ALICE, text, explicit_command=explicit))


# -- grants --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_channel_grant_runs_the_next_call_there_audited_until_revoked(protocol: str) -> None:
    async with bridge(protocol, tool_grants=GRANTS) as (host, chat, seen):
        await say(host, 'call feat wipe {"target": "/a"}')
        with anyio.fail_after(patient(10)):
            card = await chat.wait_card("tool")
            assert [(g.scope, g.label) for g in card.grants] == [("conversation", "Allow in this conversation for 1 h"),
                                                                 ("channel", "Allow in this channel until revoked")]
            await host.decide(DecisionIn(card.id, ALICE, "accept", grant="channel"))
            given = await chat.wait_message("allowed feat.wipe in this channel until revoked")
            await say(host, 'call feat wipe {"target": "/b"}', OTHER_THREAD)  # the same channel: no card
            await chat.wait_message("wiped /b")
            await say(host, "grants", OTHER_THREAD)
            listed = await chat.wait_message("Grants here:")
            grant_id = given.split("(grant ", 1)[1].split(";", 1)[0]
            await say(host, f"revoke {grant_id}", OTHER_THREAD)
            await chat.wait_message(f"Revoked {grant_id}")
            await say(host, 'call feat wipe {"target": "/c"}', OTHER_THREAD)
            again = await chat.wait_card("tool", index=1)
    assert seen.ran == ["wipe /a", "wipe /b"] and again.conversation == OTHER_THREAD
    assert f"{grant_id}: feat.wipe in this channel until revoked, given by Alice" in listed
    [used] = [r for r in await host.store.audit_rows() if r.outcome == "granted"]
    assert grant_id in used.detail and (used.actor, used.requester) == (ALICE.key, ALICE.key)
    assert used.conversation == OTHER_THREAD.id()


async def test_only_the_giver_or_an_approver_revokes_and_other_channels_never_see_a_grant() -> None:
    async with bridge(tool_grants=GRANTS) as (host, chat, _):
        grant = await host.grants.give("tool", "feat", "wipe", GRANTS[1], ROOM, ALICE)
        await host.handle_message(MessageIn(ROOM, BOB, f"revoke {grant.id}", explicit_command=True))
        with anyio.fail_after(patient(10)):
            refused = await chat.wait_message("can revoke")
            await say(host, 'call feat wipe {"target": "/x"}', OTHER_CHANNEL)
            await chat.wait_card("tool")
            await say(host, f"revoke {grant.id}", OTHER_CHANNEL)
            unknown = await chat.wait_message("No grant")
    assert refused == f"Only Alice (who gave it) or feat's approvers can revoke {grant.id}."
    assert unknown == f"No grant {grant.id!r} holds here; see `grants`."


def test_a_conversation_grant_expires_in_virtual_time() -> None:
    # The clock is trio's MockClock: an hour passes without anyone waiting for it.
    async def run() -> None:
        start = time.time()
        grants = Grants(await open_store(":memory:"), _no_say, clock=lambda: start + trio.current_time())
        grant = await grants.give("tool", "feat", "wipe", GRANTS[0], ROOM, ALICE)
        assert await grants.find("tool", "feat", "wipe", ROOM) == grant
        assert await grants.find("tool", "feat", "wipe", OTHER_THREAD) is None  # another conversation of the channel
        await trio.sleep(3599)
        assert "for 1 min more" in (await grants.here(ROOM))[0].describe(grants.clock())
        await trio.sleep(2)
        assert await grants.find("tool", "feat", "wipe", ROOM) is None and await grants.here(ROOM) == []

    trio.run(run, clock=trio.testing.MockClock(autojump_threshold=0))


async def _no_say(conversation: ConversationKey, text: str) -> None:
    raise AssertionError("nothing is said here")


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_sampling_grant_skips_the_approval_but_not_the_review(protocol: str) -> None:
    async with bridge(protocol, sampling=SamplingPolicy(grants=GRANTS)) as (host, chat, _):
        await say(host, 'call feat ask_model {"prompt": "one"}')
        with anyio.fail_after(patient(10)):
            approval = await chat.wait_card("sampling")
            await host.decide(DecisionIn(approval.id, ALICE, "accept", grant="conversation"))
            review = await chat.wait_card("sampling_review")
            await host.decide(DecisionIn(review.id, ALICE, "accept", {"answer": "1"}))
            await chat.wait_message("text=1")
            await say(host, 'call feat ask_model {"prompt": "two"}')
            second = await chat.wait_card("sampling_review", index=1)
            await host.decide(DecisionIn(second.id, ALICE, "accept", {"answer": "2"}))
            await chat.wait_message("text=2")
    assert [c.kind.value for c in chat.cards.values()] == ["sampling", "sampling_review", "sampling_review"]
    assert [r.kind for r in await host.store.audit_rows() if r.outcome == "granted"] == ["sampling"]


# -- channel policy ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_channel_sees_only_its_servers_and_runs_by_its_own_rules(protocol: str) -> None:
    ops = {"test:C1": ChannelPolicy(tool_rules=(("feat.wipe", "never"),), servers=("feat",))}
    async with bridge(protocol, config={"channels": ops}) as (host, chat, seen):
        await say(host, 'call feat wipe {"target": "/ops"}')  # #ops runs it without asking
        with anyio.fail_after(patient(10)):
            await chat.wait_message("wiped /ops")
            await say(host, 'call forms echo {"message": "hi"}')
            refused = await chat.wait_message("forms")
            await say(host, "servers")
            listing = await chat.wait_message("Servers:")
            await say(host, 'call feat wipe {"target": "/general"}', OTHER_CHANNEL)  # elsewhere it asks
            card = await chat.wait_card("tool")
    assert refused == "The server 'forms' is not available in this channel."
    assert "feat" in listing and "forms" not in listing
    assert card.conversation == OTHER_CHANNEL and seen.ran == ["wipe /ops"]


async def test_the_agent_can_be_off_in_a_channel(llm: FakeLLMServer) -> None:
    provider = OpenAIProvider("gpt-test", "sk-test", base_url=f"{llm.url}/v1", timeout=5, max_retries=0)
    channels = {"test:C*": ChannelPolicy(agent=False)}
    async with bridge(provider=provider, config={"channels": channels}) as (host, chat, _):
        await say(host, "hello there", explicit=False)
        with anyio.fail_after(patient(10)):
            text = await chat.wait_message("agent is off")
    assert text.startswith("The agent is off in this channel") and llm.requests == []


def test_channel_rules_are_matched_exactly_then_by_glob() -> None:
    from bridge.config.policy import channel_policy

    config = Config(channels={"test:C1": ChannelPolicy(agent=False), "test:*": ChannelPolicy(servers=())})
    assert channel_policy(config, ROOM).agent is False
    assert channel_policy(config, OTHER_CHANNEL).servers == ()
    assert channel_policy(config, ConversationKey("slack", "T", "C1")).servers is None


# -- budgets -------------------------------------------------------------------------------------------------------


async def test_a_budget_stops_the_agent_with_its_message_and_resets(llm: FakeLLMServer) -> None:
    provider = OpenAIProvider("gpt-test", "sk-test", base_url=f"{llm.url}/v1", timeout=5, max_retries=0)
    llm.reply(*[Reply(body=openai_completion(f"answer {n}")) for n in range(3)])  # 7 tokens each
    async with bridge(provider=provider, config={"budgets": BudgetLimits(per_user=10)}) as (host, chat, _):
        now = [1_799_971_200.0 + 3600 * 20]  # 20:00 UTC
        host.budgets.clock = lambda: now[0]
        with anyio.fail_after(patient(10)):
            for n in range(2):
                await say(host, f"question {n}", explicit=False)
                await chat.wait_message(f"answer {n}")
            await say(host, "question 2", explicit=False)
            stopped = await chat.wait_message("not asked")
            await say(host, "usage")
            usage = await chat.wait_message("Model use today")
            now[0] += 4 * 3600  # past midnight UTC
            await say(host, "question 3", explicit=False)
            await chat.wait_message("answer 2")
    assert stopped == ("The model was not asked: Alice's daily budget of 10 tokens is used up (14 today); it resets "
                       "at 00:00 UTC, in 4 h 00 min.")
    assert "• Alice's daily budget: 14 of 10 tokens" in usage and "This conversation's daily budget: 14 (no limit)" \
        in usage
    assert len(llm.requests) == 3


@pytest.mark.parametrize("protocol", ERAS)
async def test_sampling_is_refused_over_the_conversation_budget(protocol: str, llm: FakeLLMServer) -> None:
    provider = OpenAIProvider("gpt-test", "sk-test", base_url=f"{llm.url}/v1", timeout=5, max_retries=0)
    llm.reply(Reply(body=openai_completion("Paris.")))
    policy = SamplingPolicy(approval="auto", review=False)
    async with bridge(protocol, provider, config={"budgets": BudgetLimits(per_conversation=5)}, sampling=policy) \
            as (host, chat, _):
        await say(host, 'call feat ask_model {"prompt": "Capital of France?"}')
        with anyio.fail_after(patient(10)):
            await chat.wait_message("text=Paris.")
            await say(host, 'call feat ask_model {"prompt": "Capital of Spain?"}')
            told = await chat.wait_message("refused")
            await chat.wait_message("Token budget exhausted")
    assert "This conversation's daily budget of 5 tokens is used up (7 today)" in told
    assert len(llm.requests) == 1


def test_quorum_rules_that_cannot_hold_are_config_errors() -> None:
    from bridge.config.file import from_mapping
    from bridge.errors import ConfigError

    bad = {"servers": {"s": {"command": "x", "approvers": {"people": ["slack:U1"], "required": 2},
                             "roots": {"approvers": {"people": ["slack:U1", "slack:U2"], "required": 2}},
                             "tools": {"approve": {"rm_*": {"approvers": {"groups": ["nope"]}}}}}},
           "channels": {"C1": {}, "slack:C2": {"servers": ["ghost"]}}}
    with pytest.raises(ConfigError) as caught:
        from_mapping(bad)
    assert caught.value.problems == [
        "channels.C1: name a channel as <platform>:<channel id>, e.g. slack:C0123"]
    del bad["channels"]["C1"]  # type: ignore[attr-defined]
    with pytest.raises(ConfigError) as caught:
        from_mapping(bad)
    assert caught.value.problems == [
        "servers.s.approvers: required is 2 but only 1 people are named",
        "servers.s.roots.approvers: one answer decides forms, links and roots; required must be 1",
        "servers.s.tools.approve.rm_*.approvers: there is no group 'nope' under groups",
        "channels.slack:C2.servers: there is no server 'ghost'"]
    console = {"chat": {"console": {}}, "servers": {"s": {"command": "x", "tools": {"approvers": {
        "people": ["console:you", "console:them"], "required": 2}}}}}
    with pytest.raises(ConfigError) as caught:
        from_mapping(console)
    assert "required 2 can never be met" in caught.value.problems[0]
    rule = from_mapping({"servers": {"s": {"command": "x", "approvers": ["slack:U1"], "sampling": {
        "approvers": {"people": ["slack:U1"], "groups": ["g"], "required": 2, "notify": "dm"},
        "grants": {"conversation": "1h", "channel": "until revoked"}}}}, "groups": {"g": ["slack:U2"]}})
    server = rule.servers["s"]
    assert server.approvers == ApproverRule(("slack:U1",))
    assert server.sampling.approvers == ApproverRule(("slack:U1",), ("g",), 2, "dm", False)
    assert server.sampling.grants == (GrantScope("conversation", 3600.0), GrantScope("channel", None))
