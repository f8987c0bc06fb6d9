"""Team decisions end to end on Matrix (a real Synapse, people as nio clients): two of three approvers by reaction,
one decline, the same person twice, strangers, a grant by reply that expires, no grant for a quorum, an approver
outside the room deciding in a DM the bot opens, and a budget stopping the agent."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from nio import InviteMemberEvent

from adapters.matrix.render import ACCEPT, DECLINE
from bridge.config.file import Config, LLMConfig, ServerConfig
from bridge.config.team import ApproverRule, BudgetLimits, GrantScope
from bridge.door.model import Actor, ConversationKey
from tests.adapters.matrix.harness import (
    Bridge,
    Person,
    body,
    bridge,
    content,
    edit_of,
    mark,
    matrix_block,
    part,
    person,
    register,
)
from tests.harness.synapse import Synapse
from tests.llm.fake_llm_server import FakeLLMServer, Reply, openai_completion
from tests.servers.features import Observed, features_server

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def team(synapse: Synapse, tmp_path: Path, names: list[str], in_room: int,
               server: Callable[[list[Person]], dict[str, Any]] | None = None,
               **config: Any) -> AsyncIterator[tuple[list[Person], Bridge, Observed]]:
    """People (the first `in_room` of them in a room with the bot, the first one its creator) and a running bridge
    whose `feat` server gets the fields `server(people)` returns."""
    bot = register(synapse, "bot")
    async with AsyncExitStack() as stack:
        people = [await stack.enter_async_context(person(synapse, n, None)) for n in names]
        mcp, seen = features_server()
        cfg = Config(servers={"feat": ServerConfig("feat", inprocess=mcp, protocol="legacy",
                                                   **(server(people) if server else {}))},
                     store=str(tmp_path / "bridge.db"), **config)
        running = await stack.enter_async_context(bridge(cfg, matrix_block(synapse, bot, tmp_path / "bot"),
                                                         tmp_path / "bridge.db"))
        first = people[0]
        room = await first.create_room([bot.user_id, *(p.user_id for p in people[1:in_room])], encrypted=False)
        await first.wait_joined(bot.user_id)
        for p in people[1:in_room]:
            await p.join(room)
        await first.say("!mcp help")  # a round trip: the bot's sync has seen everyone join
        await first.wait(lambda i, e: body(e).startswith("Commands"))
        yield people, running, seen


def key(p: Person) -> str:
    return f"matrix:{p.user_id}"


def edited(root: str, text: str) -> Callable[[int, Any], bool]:
    return lambda i, e: edit_of(root)(i, e) and text in str(content(e)["m.new_content"]["body"])


def said(text: str, after: int = 0) -> Callable[[int, Any], bool]:
    return lambda i, e: i >= after and text in body(e)


async def test_two_of_three_by_reaction_counts_people_once_and_refuses_strangers(synapse: Synapse,
                                                                                   tmp_path: Path) -> None:
    def rule(people: list[Person]) -> dict[str, Any]:
        return {"tool_approvers": (("wipe", ApproverRule(tuple(map(key, people[:3])), required=2)),)}

    async with team(synapse, tmp_path, ["ada", "bob", "cy", "eve"], 4, rule) as ([ada, _bob, cy, eve], running, seen):
        command = await ada.say('!mcp call feat wipe {"target": "/srv"}')
        root = (await ada.wait(part("card"))).event_id
        assert "Needs 2 approvals from different people; 0 so far." in body(await ada.wait(part("card")))
        await eve.react(root, ACCEPT)
        await eve.wait(said("can answer this request"))
        await ada.react(root, ACCEPT)
        await ada.wait(edited(root, "1 so far (ada"))
        await ada.say("approve", thread=command, latest=root)  # the same person again, by reply this time
        await ada.wait(said("You have already approved this request"))
        assert seen.ran == []
        await cy.react(root, ACCEPT)
        await ada.wait(said("wiped /srv"))
        final = await ada.wait(edited(root, "Accepted by"))
        rows = [(r.outcome, r.actor) for r in await running.store.audit_rows() if r.kind == "tool"]
    assert seen.ran == ["wipe /srv"]
    assert "Accepted by ada" in str(content(final)["m.new_content"]["body"])
    assert rows == [("approved", key(ada)), ("accepted", key(cy))]


async def test_one_decline_by_reaction_ends_it(synapse: Synapse, tmp_path: Path) -> None:
    def rule(people: list[Person]) -> dict[str, Any]:
        return {"tool_approvers": (("wipe", ApproverRule(tuple(map(key, people)), required=2)),)}

    async with team(synapse, tmp_path, ["ada", "bob", "cy"], 3, rule) as ([ada, bob, cy], _, seen):
        await ada.say('!mcp call feat wipe {"target": "/srv"}')
        root = (await ada.wait(part("card"))).event_id
        await bob.react(root, ACCEPT)
        await ada.wait(edited(root, "1 so far"))
        await cy.react(root, DECLINE)
        result = await ada.wait(said("was not run"))
        await ada.wait(edited(root, "Declined by cy"))
    assert "declined by cy" in body(result) and "(after approvals by bob" in body(result) and seen.ran == []


async def test_a_grant_by_reply_holds_in_the_room_until_it_expires_and_never_for_a_quorum(synapse: Synapse,
                                                                                         tmp_path: Path) -> None:
    def rules(people: list[Person]) -> dict[str, Any]:
        return {"tool_approvers": (("wipe", ApproverRule(tuple(map(key, people)), required=2)),),
                "tool_rules": (("add", "always"),), "tool_grants": (GrantScope("channel", 3600.0),)}

    async with team(synapse, tmp_path, ["ada", "bob"], 2, rules) as ([ada, _bob], running, seen):
        now = [running.host.grants.clock()]
        running.host.grants.clock = lambda: now[0]
        command = await ada.say('!mcp call feat add {"a": 2, "b": 3}')
        root = await ada.wait(part("card"))
        assert "Reply allow channel to allow in this channel for 1 h." in body(root)
        await ada.say("allow channel", thread=command, latest=root.event_id)
        await ada.wait(said("feat.add:"))
        await ada.wait(said("allowed feat.add in this channel for 1 h"))
        after = len(ada.seen)
        await ada.say('!mcp call feat add {"a": 4, "b": 5}')  # a new thread in the same room: no card
        await ada.wait(said("feat.add:\n9", after))
        assert not [e for e in ada.seen[after:] if mark(e).get("part") == "card"]
        grant = (await running.host.grants.here(ConversationKey("matrix", "localhost", ada.room_id, "x")))[0]
        await running.host.grants.give("tool", "feat", "wipe", GrantScope("channel", None),
                                       ConversationKey("matrix", "localhost", ada.room_id),
                                       Actor("matrix", ada.user_id))
        await ada.say('!mcp call feat wipe {"target": "/srv"}')
        await ada.wait(lambda i, e: i >= after and mark(e).get("part") == "card" and "wipe" in body(e))
        now[0] += 3601
        await ada.say('!mcp call feat add {"a": 1, "b": 1}')
        await ada.wait(lambda i, e: i >= after and mark(e).get("part") == "card" and "feat.add" in body(e))
        used = [r.outcome for r in await running.store.audit_rows() if grant.id in r.detail]
    assert used == ["granted"]
    assert seen.ran == []


async def test_an_approver_outside_the_room_decides_in_a_dm_and_the_rooms_card_closes(synapse: Synapse,
                                                                                      tmp_path: Path) -> None:
    def rule(people: list[Person]) -> dict[str, Any]:
        return {"tool_approvers": (("wipe", ApproverRule((key(people[1]),))),)}

    async with team(synapse, tmp_path, ["ada", "grace"], 1, rule) as ([ada, grace], running, seen):
        await ada.say('!mcp call feat wipe {"target": "/srv"}')
        card = await ada.wait(part("card"))
        assert f"Also asked privately: {grace.user_id}." in body(card)
        await grace.wait(lambda i, e: isinstance(e, InviteMemberEvent) and e.state_key == grace.user_id)
        [dm] = list(grace.client.invited_rooms)
        await grace.client.join(dm)
        grace.room_id = dm
        copy = await grace.wait(lambda i, e: mark(e).get("part") == "card"
                                and mark(e).get("interaction") == f"{mark(card)['interaction']}~1")
        assert "Asked in another conversation" in body(copy)
        await grace.react(copy.event_id, ACCEPT)
        await ada.wait(said("wiped /srv"))
        await ada.wait(edited(card.event_id, "Accepted by grace"))
        await grace.wait(edited(copy.event_id, "Accepted by grace"))
        assert await running.store.adapter_value("matrix", f"direct:{grace.user_id}") == dm
    assert seen.ran == ["wipe /srv"]


async def test_a_budget_stops_the_agent_with_its_message_and_resets(synapse: Synapse, tmp_path: Path,
                                                                   llm: FakeLLMServer) -> None:
    llm.reply(Reply(body=openai_completion("first answer")), Reply(body=openai_completion("after midnight")))
    model = LLMConfig(provider="openai", model="gpt-test", api_key="sk-test", base_url=f"{llm.url}/v1")
    async with team(synapse, tmp_path, ["ada"], 1, llm=model, budgets=BudgetLimits(per_conversation=5),
                    conversation_scope="channel") as ([ada], running, _):
        now = [1_799_971_200.0 + 22 * 3600]  # 22:00 UTC
        running.host.budgets.clock = lambda: now[0]
        await ada.say("hello")  # a room of two is a direct chat: every message is for the bot
        await ada.wait(said("first answer"))
        await ada.say("again")
        stopped = await ada.wait(said("The model was not asked"))
        now[0] += 2 * 3600
        await ada.say("and again")
        await ada.wait(said("after midnight"))
    assert body(stopped) == ("The model was not asked: This conversation's daily budget of 5 tokens is used up (7 "
                             "today); it resets at 00:00 UTC, in 2 h 00 min.")
