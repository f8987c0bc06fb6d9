"""Team approvals on the core, both eras: k-of-n quorums, one decline ending them, the same person counted once,
strangers refused, groups, and approvers outside the conversation reached privately."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

import anyio
import pytest

from bridge.config.file import SamplingPolicy
from bridge.config.team import ApproverRule, GrantScope, Group
from bridge.door.model import Actor, ConversationKey, DecisionIn, Interaction, MessageIn, Status, Verdict
from bridge.host import Host
from bridge.llm import HumanProvider
from bridge.storage import open_store
from tests.harness.hosts import ALICE, BOB, ROOM, FakeChatPort, config_for, patient
from tests.servers.features import Observed, features_server

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

ERAS = ["legacy", "auto"]
CAROL = Actor("test", "U-carol", "Carol")
DAVE = Actor("test", "U-dave", "Dave")
TWO_OF_THREE = ApproverRule((ALICE.key, BOB.key, CAROL.key), required=2, requester=False)


@asynccontextmanager
async def bridge(protocol: str, *, chat: FakeChatPort | None = None, groups: dict[str, Group] | None = None,
                 **server_fields: Any) -> AsyncIterator[tuple[Host, FakeChatPort, Observed]]:
    server, seen = features_server()
    config = config_for({"feat": server}, server_protocol=protocol, groups=groups or {},
                        **{f"server_{k}": v for k, v in server_fields.items()})
    chat = chat or FakeChatPort()
    host = Host(config, await open_store(":memory:"), llm=HumanProvider())
    host.attach(chat)
    async with host:
        yield host, chat, seen


async def call(host: Host, text: str, who: Actor = ALICE, where: ConversationKey = ROOM) -> None:
    await host.handle_message(MessageIn(where, who, text, explicit_command=True))


async def decide(host: Host, card: Interaction | str, who: Actor, action: str = "accept", **kw: Any) -> Verdict:
    interaction_id = card if isinstance(card, str) else card.id
    return (await host.decide(DecisionIn(interaction_id, who, action, **kw))).verdict  # type: ignore[arg-type]


@pytest.mark.parametrize("protocol", ERAS)
async def test_two_of_three_needs_two_distinct_people_and_strangers_are_refused(protocol: str) -> None:
    async with bridge(protocol, tool_approvers=(("wipe", TWO_OF_THREE),), tool_grants=(GrantScope("channel", None),)) \
            as (host, chat, seen):
        await call(host, 'call feat wipe {"target": "/srv"}')
        with anyio.fail_after(patient(10)):
            card = await chat.wait_card("tool")
            assert (card.required, card.approvers, card.grants) == (2, frozenset({ALICE.key, BOB.key, CAROL.key}), ())
            assert await decide(host, card, DAVE) is Verdict.REFUSED
            assert await decide(host, card, ALICE) is Verdict.COUNTED
            assert await decide(host, card, ALICE) is Verdict.REFUSED  # the same person twice counts once
            progress = await chat.wait_for(lambda: chat.updates[-1] if chat.updates else None)
            assert [a.key for a in progress.approvals] == [ALICE.key] and progress.still_may() == [BOB.key, CAROL.key]
            assert seen.ran == []
            assert await decide(host, card, BOB, grant="channel") is Verdict.INVALID  # no grant widens a quorum
            assert await decide(host, card, BOB) is Verdict.CLAIMED
            await chat.wait_message("feat.wipe:")
            final = await chat.wait_finished(card.id)
    assert seen.ran == ["wipe /srv"]
    assert [a.key for a in final.approvals] == [ALICE.key, BOB.key] and final.by == BOB
    rows = await host.store.audit_rows(card.id)
    assert [(r.outcome, r.actor) for r in rows] == [("approved", ALICE.key), ("accepted", BOB.key)]
    assert rows[1].detail == "tool wipe: approvals 2 of 2: Alice, Bob"  # a tool approval's row names its tool
    notices = [text for who, text in chat.notices]
    assert "Only the approvers named on it can answer this request." in notices
    assert any("already approved" in text for text in notices)


@pytest.mark.parametrize("protocol", ERAS)
async def test_one_decline_by_an_approver_ends_it_at_once(protocol: str) -> None:
    async with bridge(protocol, tool_approvers=(("wipe", TWO_OF_THREE),)) as (host, chat, seen):
        await call(host, 'call feat wipe {"target": "/srv"}')
        with anyio.fail_after(patient(10)):
            card = await chat.wait_card("tool")
            assert await decide(host, card, CAROL) is Verdict.COUNTED
            assert await decide(host, card, BOB, "decline") is Verdict.CLAIMED
            result = await chat.wait_message("feat.wipe")
            final = await chat.wait_finished(card.id)
    assert seen.ran == []
    assert "was not run: declined by Bob (after approvals by Carol)" in result
    assert final.status is Status.DECLINED and [a.key for a in final.approvals] == [CAROL.key]


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_quorum_tool_is_never_auto_approved_by_a_grant(protocol: str) -> None:
    async with bridge(protocol, tool_approvers=(("wipe", TWO_OF_THREE),), tool_grants=(GrantScope("channel", None),),
                      tool_rules=(("*", "never"),)) as (host, chat, seen):
        await host.grants.give("tool", "feat", "wipe", GrantScope("channel", None), ROOM, ALICE)
        await call(host, 'call feat wipe {"target": "/a"}')
        with anyio.fail_after(patient(10)):
            card = await chat.wait_card("tool")  # neither the grant nor the `never` rule skips the quorum
            await decide(host, card, ALICE)
            await decide(host, card, CAROL)
            await chat.wait_message("feat.wipe:")
    assert seen.ran == ["wipe /a"]
    assert "granted" not in [r.outcome for r in await host.store.audit_rows()]


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_sampling_request_needs_its_quorum_then_one_review(protocol: str) -> None:
    rule = ApproverRule((ALICE.key, BOB.key), required=2, requester=False)
    async with bridge(protocol, sampling=SamplingPolicy(approvers=rule)) as (host, chat, _):
        await call(host, 'call feat ask_model {"prompt": "Capital of France?"}')
        with anyio.fail_after(patient(10)):
            approval = await chat.wait_card("sampling")
            assert approval.required == 2
            edited = {"system_prompt": "Be rude.", "prompt": "Capital of France?"}
            assert await decide(host, approval, ALICE, content=edited) is Verdict.INVALID  # approved as shown only
            assert await decide(host, approval, ALICE) is Verdict.COUNTED
            assert await decide(host, approval, BOB) is Verdict.CLAIMED
            review = await chat.wait_card("sampling_review")
            assert review.required == 1
            assert await decide(host, review, BOB, content={"answer": "Paris."}) is Verdict.CLAIMED
            result = await chat.wait_message("feat.ask_model:")
    assert result.endswith("text=Paris.")


@pytest.mark.parametrize("protocol", ERAS)
async def test_approvers_outside_the_conversation_get_a_private_copy_that_decides(protocol: str) -> None:
    chat = FakeChatPort()
    chat.present = frozenset({ALICE.user_id, CAROL.user_id})  # Bob is not in the channel
    rule = ApproverRule((ALICE.key, BOB.key, CAROL.key), required=2, requester=True)
    async with bridge(protocol, chat=chat, tool_approvers=(("wipe", rule),)) as (host, chat, seen):
        await call(host, 'call feat wipe {"target": "/srv"}')
        with anyio.fail_after(patient(10)):
            card = await chat.wait_card("tool")
            assert card.asked == (BOB.key,)
            copy = await chat.wait_for(lambda: next((c for i, c in chat.cards.items() if "~" in i), None))
            assert (copy.conversation.channel, copy.origin, copy.id) == (f"DM-{BOB.user_id}", ROOM, f"{card.id}~1")
            assert host.open_interaction(copy.id) == replace(copy, approvals=())
            assert await decide(host, card, ALICE) is Verdict.COUNTED
            await chat.wait_for(lambda: next((u for u in chat.updates if u.id == copy.id), None))
            assert await decide(host, copy.id, BOB) is Verdict.CLAIMED  # decided in the DM: the thread's card ends
            await chat.wait_message("feat.wipe:")
            original, private = await chat.wait_finished(card.id), await chat.wait_finished(copy.id)
    assert seen.ran == ["wipe /srv"] and original == private and original.by == BOB


async def test_notify_dm_asks_every_approver_but_the_requester_privately() -> None:
    rule = ApproverRule((ALICE.key, BOB.key, CAROL.key), notify="dm", requester=True)
    async with bridge("legacy", tool_approvers=(("wipe", rule),)) as (host, chat, _):
        await call(host, 'call feat wipe {"target": "/srv"}')
        with anyio.fail_after(patient(10)):
            card = await chat.wait_card("tool")
            await chat.wait_for(lambda: len(chat.cards) == 3 or None)
            await decide(host, f"{card.id}~2", CAROL, "decline")
            await chat.wait_message("feat.wipe")
            await chat.wait_for(lambda: len(chat.finished) == 3 or None)
    assert card.asked == (BOB.key, CAROL.key)
    assert chat.finished[card.id].by == CAROL


async def test_groups_are_config_lists_and_slack_user_groups() -> None:
    slack = FakeChatPort("slack")
    slack.groups["S0ONCALL"] = frozenset({"U77"})
    oncall = Actor("slack", "U77", "Oncall")
    groups = {"ops": Group((CAROL.key,), slack_usergroup="S0ONCALL")}
    rule = ApproverRule(groups=("ops",), required=2, requester=False)
    async with bridge("legacy", groups=groups, tool_approvers=(("wipe", rule),)) as (host, chat, seen):
        host.attach(slack)
        await call(host, 'call feat wipe {"target": "/srv"}')
        with anyio.fail_after(patient(10)):
            card = await chat.wait_card("tool")
            assert card.approvers == {CAROL.key, oncall.key}
            assert card.asked == (oncall.key,)  # on another platform: reached in a Slack DM
            await slack.wait_card("tool")
            assert await decide(host, card, ALICE) is Verdict.REFUSED
            await decide(host, card, CAROL)
            assert await decide(host, f"{card.id}~1", oncall) is Verdict.CLAIMED
            await chat.wait_message("feat.wipe:")
    assert seen.ran == ["wipe /srv"]


async def test_a_quorum_that_cannot_be_met_fails_with_the_reason() -> None:
    rule = ApproverRule(groups=("empty",), required=2, requester=False)
    async with bridge("legacy", groups={"empty": Group()}, tool_approvers=(("wipe", rule),)) as (host, chat, seen):
        await call(host, 'call feat wipe {"target": "/srv"}')
        with anyio.fail_after(patient(10)):
            result = await chat.wait_message("feat.wipe")
    assert "it needs 2 approvers and only 0 could be found" in result and seen.ran == []
