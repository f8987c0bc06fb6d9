"""Every store operation, the same test body on SQLite and on a real Postgres."""

from __future__ import annotations

import dataclasses

import anyio
import pytest

from bridge.door.model import CardRef, ConversationKey, Outcome, Status
from bridge.errors import StoreError
from bridge.storage import SqlStore
from tests.harness.hosts import ALICE, BOB, ROOM, patient
from tests.storage.support import accepted, interaction, pending

pytestmark = pytest.mark.anyio

OTHER = ConversationKey("test", "w", "other")


async def test_an_interaction_is_stored_carded_found_and_listed_in_order(store: SqlStore) -> None:
    first, second = interaction(), interaction(message="Second?")
    await store.save_interaction(first)
    await store.save_pending_call(pending("call-1"))
    await store.save_interaction(second, pending_call="call-1", input_key="k")
    await store.set_card(first.id, CardRef(first.id, {"ts": "1.2", "channel": "C1"}))

    got = await store.interaction(first.id)
    assert got is not None
    assert got.interaction == first
    assert got.status is Status.OPEN and got.outcome is None
    assert got.card == CardRef(first.id, {"ts": "1.2", "channel": "C1"})
    assert (got.pending_call, got.input_key) == (None, None)
    assert await store.interaction("nope") is None
    assert [s.interaction.id for s in await store.open_interactions()] == [first.id, second.id]
    for_call = await store.interactions_for_call("call-1")
    assert [(s.interaction.id, s.input_key) for s in for_call] == [(second.id, "k")]


async def test_a_request_of_a_call_not_on_record_is_refused_and_nothing_is_stored(store: SqlStore) -> None:
    """A 2026 call's card is stored only while its call is: one that ended (or was never stored) cannot be
    continued, so its request is refused before a card could be posted."""
    await store.save_pending_call(pending("call-1"))
    await store.delete_pending_call("call-1")
    item = interaction()
    with pytest.raises(StoreError, match="call-1 is not on record"):
        await store.save_interaction(item, pending_call="call-1", input_key="k", parked=True)
    assert await store.interaction(item.id) is None
    assert await store.open_interactions() == []


async def test_a_claim_wins_once_with_its_audit_row_and_later_claims_lose(store: SqlStore) -> None:
    item = interaction()
    await store.save_interaction(item)
    assert await store.claim(item, accepted(n=4)) is True
    assert await store.claim(item, Outcome(Status.EXPIRED, reason="late")) is False
    assert await store.claim(interaction(), accepted()) is False  # never stored: nothing to win

    got = await store.interaction(item.id)
    assert got is not None and got.status is Status.ACCEPTED
    assert got.outcome == accepted(n=4)
    rows = await store.audit_rows(item.id)
    assert [(r.outcome, r.actor, r.requester, r.kind, r.server) for r in rows] == [
        ("accepted", ALICE.key, ALICE.key, "form", "srv")]
    assert await store.open_interactions() == []
    assert await store.decided([item.id, "nope"]) == {item.id}


async def test_a_hundred_concurrent_claimers_make_exactly_one_winner(store: SqlStore) -> None:
    item = interaction()
    await store.save_interaction(item)
    wins: list[int] = []

    async def claimer(n: int) -> None:
        if await store.claim(item, accepted(n=n % 10)):
            wins.append(n)

    with anyio.fail_after(patient(60)):
        async with anyio.create_task_group() as tg:
            for n in range(100):
                tg.start_soon(claimer, n)
    assert len(wins) == 1
    got = await store.interaction(item.id)
    assert got is not None and got.outcome == accepted(n=wins[0] % 10)
    assert len(await store.audit_rows(item.id)) == 1


async def test_a_claim_whose_caller_is_cancelled_still_completes(store: SqlStore) -> None:
    """A write, once asked for, finishes: a cancelled caller never leaves a half-known decision behind."""
    item = interaction()
    await store.save_interaction(item)
    with anyio.CancelScope() as scope:
        scope.cancel()
        await store.claim(item, accepted())
    got = await store.interaction(item.id)
    assert got is not None and got.status is Status.ACCEPTED


async def test_standalone_audit_rows_are_kept_in_order(store: SqlStore) -> None:
    item = interaction()
    await store.audit(item, Outcome(Status.FAILED, reason="the server stopped"))
    await store.audit(item, Outcome(Status.CANCELLED, by=BOB), detail="withdrawn")
    rows = await store.audit_rows()
    assert [(r.interaction_id, r.outcome, r.actor, r.actor_name, r.detail) for r in rows] == [
        (item.id, "failed", None, None, "the server stopped"),
        (item.id, "cancelled", BOB.key, BOB.label(), "withdrawn")]
    assert all(r.conversation == ROOM.id() for r in rows)


async def test_pending_calls_are_saved_replaced_listed_and_deleted(store: SqlStore) -> None:
    one, two = pending("call-1"), pending("call-2", OTHER)
    await store.save_pending_call(one)
    await store.save_pending_call(two)
    await store.save_pending_call(dataclasses.replace(one, request_state="state-2"))  # a later round
    calls = await store.pending_calls()
    assert [(c.id, c.request_state) for c in calls] == [("call-2", "state-1"), ("call-1", "state-2")]
    assert calls[1].conversation == ROOM and calls[1].requester == ALICE
    assert dict(calls[1].arguments) == {"tag": "x"}
    assert dict(calls[1].input_requests) == {"k": {"method": "elicitation/create"}}
    await store.delete_pending_call("call-2")
    await store.delete_pending_call("nope")
    assert [c.id for c in await store.pending_calls()] == ["call-1"]


async def test_roots_settings_and_adapter_state_per_conversation(store: SqlStore) -> None:
    await store.add_root(ROOM, "file:///a", "A")
    await store.add_root(ROOM, "file:///b", "B")
    await store.add_root(OTHER, "file:///c", "C")
    await store.add_root(ROOM, "file:///a", "A again")  # given again: moves to the end
    assert await store.roots(ROOM) == [("file:///b", "B"), ("file:///a", "A again")]
    assert await store.remove_root(ROOM, "file:///b") is True
    assert await store.remove_root(ROOM, "file:///b") is False
    assert await store.roots(OTHER) == [("file:///c", "C")]

    assert await store.setting(ROOM, "roots:srv") is None
    await store.set_setting(ROOM, "roots:srv", "all")
    await store.set_setting(ROOM, "roots:srv", "ask")
    assert await store.setting(ROOM, "roots:srv") == "ask"
    assert await store.setting(OTHER, "roots:srv") is None

    await store.set_adapter_value("slack", "home:U1", "v1")
    await store.set_adapter_value("slack", "home:U1", "v2")
    assert await store.adapter_value("slack", "home:U1") == "v2"
    assert await store.adapter_value("matrix", "home:U1") is None


async def test_history_appends_in_order_and_clears_per_conversation(store: SqlStore) -> None:
    await store.append_history(ROOM, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])
    await store.append_history(ROOM, [])
    await store.append_history(OTHER, [{"role": "user", "content": "elsewhere"}])
    await store.append_history(ROOM, [{"role": "user", "content": "again"}])
    assert [m["content"] for m in await store.history(ROOM)] == ["hi", "yo", "again"]
    await store.clear_history(ROOM)
    assert await store.history(ROOM) == []
    assert [m["content"] for m in await store.history(OTHER)] == ["elsewhere"]


async def test_a_closed_store_refuses_with_a_store_error(target: str) -> None:
    from bridge.errors import StoreError
    from bridge.storage import open_store

    store = await open_store(target, worker_id="w1")
    await store.aclose()
    await store.aclose()  # twice is fine
    with pytest.raises(StoreError):
        await store.interaction("x")
