"""Who a card reaches (`bridge.cards.recipients`): groups expanded into approvers, private copies for approvers
elsewhere."""

from __future__ import annotations

import time

import pytest

from bridge.cards.chat import Outbound
from bridge.cards.recipients import Routing
from bridge.config.team import Group
from bridge.door.forms import form_from_schema
from bridge.door.model import Interaction, Kind, ServerLabel
from tests.harness.hosts import ALICE, BOB, ROOM, FakeChatPort

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]


def card(**fields: object) -> Interaction:
    base: dict[str, object] = dict(
        id="i1", kind=Kind.FORM, server=ServerLabel("srv"), conversation=ROOM, requester=ALICE,
        approvers=frozenset({ALICE.key}), message="How many?",
        form=form_from_schema({"type": "object", "properties": {"n": {"type": "integer"}}}),
        expires_at=time.time() + 600)
    base.update(fields)
    return Interaction(**base)  # type: ignore[arg-type]


def routing(groups: dict[str, Group] | None = None) -> Routing:
    chat = FakeChatPort()
    chat.present = frozenset({ALICE.user_id})  # only Alice is in the room
    outbound = Outbound()
    outbound.attach(chat)
    return Routing(groups or {}, outbound)


async def test_a_card_only_its_requester_decides_comes_back_as_it_was() -> None:
    item = card()
    assert await routing().prepare(item) is item


async def test_a_group_s_members_join_the_approvers_and_those_outside_the_thread_are_asked_privately() -> None:
    item = card(groups=("oncall",))
    prepared = await routing({"oncall": Group(people=(BOB.key,))}).prepare(item)
    assert prepared.approvers == {ALICE.key, BOB.key}
    assert prepared.asked == (BOB.key,)  # not in the room: asked privately


async def test_asking_privately_is_worked_out_again_from_the_approvers_not_kept_from_before() -> None:
    item = card(asked=(BOB.key,))
    prepared = await routing().prepare(item)
    assert prepared.asked == () and prepared.approvers == {ALICE.key}
