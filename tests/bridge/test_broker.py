"""The broker alone, on trio with a mock clock, so deadlines of minutes pass in virtual time.

The broker is pure anyio: it runs on trio as well as asyncio. Its timeouts are outcomes, not errors, and its cleanup
(finishing the card, writing the audit row) happens in a shielded scope even when the waiter is cancelled. The store
is SQLite's `:memory:`, which runs on the event loop (no thread), so the mock clock jumps only when the broker waits.
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest
import trio.testing

from bridge.cards.broker import Broker
from bridge.cards.chat import Outbound
from bridge.cards.held import Parked, ParkedEnded, handoff_stream
from bridge.cards.recipients import Routing
from bridge.door.forms import form_from_schema
from bridge.door.model import Actor, DecisionIn, Interaction, Kind, Outcome, ServerLabel, Status, Verdict
from bridge.storage import SqlStore, open_store
from bridge.text.presentation import describe_outcome
from tests.harness.hosts import ALICE, BOB, ROOM, FakeChatPort
from tests.storage.support import pending

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    return ("trio", {"clock": trio.testing.MockClock(autojump_threshold=0)})


def interaction(timeout: float, **fields: Any) -> Interaction:
    form = form_from_schema({"type": "object", "properties": {"n": {"type": "integer", "maximum": 9}},
                             "required": ["n"]})
    base: dict[str, Any] = dict(
        id=f"i{time.monotonic_ns()}", kind=Kind.FORM, server=ServerLabel("srv"), conversation=ROOM, requester=ALICE,
        approvers=frozenset({ALICE.key}), message="How many?", form=form, expires_at=time.time() + timeout)
    base.update(fields)
    return Interaction(**base)


async def broker() -> tuple[Broker, FakeChatPort, SqlStore]:
    chat, store = FakeChatPort(), await open_store(":memory:")
    return Broker(store, lambda _: chat), chat, store


async def test_an_hour_long_deadline_expires_in_virtual_time_and_finishes_the_card() -> None:
    b, chat, store = await broker()
    item = interaction(3600)
    started = anyio.current_time()
    outcome = await b.ask(item)
    assert outcome.status is Status.EXPIRED
    assert anyio.current_time() - started > 3590  # virtual seconds: the mock clock jumped, nobody waited
    assert chat.finished[item.id].status is Status.EXPIRED
    assert [r.outcome for r in await store.audit_rows(item.id)] == ["expired"]


async def test_a_decision_after_a_long_wait_wins_and_later_ones_are_late() -> None:
    b, _chat, store = await broker()
    item = interaction(3600)
    results: list[Outcome] = []

    async def ask() -> None:
        results.append(await b.ask(item))

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask)
        await b.wait_open(item.id)
        await anyio.sleep(60 * 59)
        assert b.decide_nowait(DecisionIn(item.id, BOB, "accept", {"n": 1})).verdict is Verdict.REFUSED
        assert b.decide_nowait(DecisionIn(item.id, ALICE, "accept", {"n": 10})).verdict is Verdict.INVALID
        assert b.decide_nowait(DecisionIn(item.id, ALICE, "accept", {"n": "3"})).verdict is Verdict.CLAIMED
        assert b.decide_nowait(DecisionIn(item.id, ALICE, "decline")).verdict is Verdict.LATE
    assert results[0].status is Status.ACCEPTED and results[0].content == {"n": 3}
    assert len(await store.audit_rows(item.id)) == 1


async def test_a_withdrawn_request_still_finishes_its_card() -> None:
    b, chat, store = await broker()
    item = interaction(600)
    with anyio.move_on_after(5):
        await b.ask(item)
    # move_on_after cancelled the wait (the request was withdrawn): the card is final all the same.
    assert chat.finished[item.id].status is Status.CANCELLED
    assert chat.finished[item.id].reason == "the request was withdrawn"
    assert [r.outcome for r in await store.audit_rows()] == ["cancelled"]


async def test_durable_requests_stay_open_at_shutdown_others_end() -> None:
    b, chat, store = await broker()
    legacy, durable = interaction(600), interaction(600)
    await store.save_pending_call(pending("call-1"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(b.ask, legacy)
        tg.start_soon(lambda: b.ask(durable, pending_call="call-1", input_key="k"))
        await b.wait_open(legacy.id)
        await b.wait_open(durable.id)
        b.close()
        tg.cancel_scope.cancel()
    assert chat.finished[legacy.id].reason == "the bridge is shutting down"
    assert durable.id not in chat.finished
    [still_open] = await store.open_interactions()
    assert (still_open.interaction.id, still_open.pending_call, still_open.input_key) == (durable.id, "call-1", "k")


async def test_a_card_that_cannot_be_posted_fails_cleanly() -> None:
    b, chat, store = await broker()
    chat.fail_posts = True
    outcome = await b.ask(interaction(600))
    assert outcome.status is Status.FAILED and "could not be posted" in outcome.reason
    assert [r.outcome for r in await store.audit_rows()] == ["failed"]


async def test_quick_accept_sends_the_prefilled_defaults() -> None:
    b, _chat, _store = await broker()
    form = form_from_schema({"type": "object", "properties": {"n": {"type": "integer", "default": 4}}})
    item = interaction(600, form=form, quick_accept=True, kind=Kind.TOOL)
    results: list[Outcome] = []

    async def ask() -> None:
        results.append(await b.ask(item))

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask)
        await b.wait_open(item.id)
        b.decide_nowait(DecisionIn(item.id, ALICE, "accept"))
    assert results[0].content == {"n": 4}


# -- several approvers ---------------------------------------------------------------------------------------------

CAROL = Actor("test", "U-carol", "Carol")
QUORUM: dict[str, Any] = dict(kind=Kind.TOOL, form=form_from_schema({"type": "object", "properties": {}}),
                              quick_accept=True, required=2, approvers=frozenset({ALICE.key, BOB.key, CAROL.key}))


async def test_a_quorum_short_of_approvals_expires_naming_who_approved() -> None:
    b, chat, store = await broker()
    item = interaction(3600, **QUORUM)
    results: list[Outcome] = []

    async def ask() -> None:
        results.append(await b.ask(item))

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask)
        await b.wait_open(item.id)
        assert b.decide_nowait(DecisionIn(item.id, BOB, "accept")).verdict is Verdict.COUNTED
        assert b.decide_nowait(DecisionIn(item.id, BOB, "accept")).verdict is Verdict.REFUSED
        await chat.wait_for(lambda: chat.updates or None)
    assert results[0].status is Status.EXPIRED and results[0].approvals == (BOB,)
    assert describe_outcome(results[0]) == "expired (after approvals by Bob)"
    assert [(r.outcome, r.actor, r.detail) for r in await store.audit_rows(item.id)] == [
        ("approved", BOB.key, "approval 1 of 2"), ("expired", None, "nobody answered in time; approvals 1 of 2: Bob")]
    assert [u.approvals for u in chat.updates] == [(BOB,)]


async def test_private_copies_are_posted_updated_and_finished_with_the_card() -> None:
    chat, store = FakeChatPort(), await open_store(":memory:")
    outbound = Outbound()
    outbound.attach(chat)
    b = Broker(store, lambda _: chat, Routing({}, outbound))
    item = interaction(600, **(QUORUM | {"notify": "dm"}))
    results: list[Outcome] = []

    async def ask() -> None:
        results.append(await b.ask(item))

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask)
        await b.wait_open(item.id)
        await chat.wait_for(lambda: len(chat.cards) == 3 or None)  # the card, and a copy for Bob and for Carol
        assert b.decide_nowait(DecisionIn(f"{item.id}~1", BOB, "accept")).verdict is Verdict.COUNTED
        await chat.wait_for(lambda: len(chat.updates) == 3 or None)
        assert b.interaction(f"{item.id}~2") is not None and b.card_of(f"{item.id}~2") is not None
        await anyio.sleep(700)
    assert results[0].status is Status.EXPIRED
    assert sorted(chat.finished) == sorted([item.id, f"{item.id}~1", f"{item.id}~2"])
    assert {c.conversation.channel for i, c in chat.cards.items() if "~" in i} == {"DM-U-bob", "DM-U-carol"}


async def test_a_resumed_quorum_card_keeps_the_approvals_counted_before_a_restart() -> None:
    b, chat, store = await broker()
    item = interaction(600, **QUORUM)
    await store.save_pending_call(pending("call-1"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: b.ask(item, pending_call="call-1", input_key="k"))
        await b.wait_open(item.id)
        b.decide_nowait(DecisionIn(item.id, CAROL, "accept"))
        b.close()
        tg.cancel_scope.cancel()
    again = Broker(store, lambda _: chat)  # the same store, a new broker: as after a restart
    handoff, handed = handoff_stream()
    with handoff, handed:
        async with anyio.create_task_group() as tg:
            await tg.start(again.run, handoff)
            await again.repark(item, None, "call-1", "k")
            opened = await again.wait_open(item.id)
            assert opened.approvals == (CAROL,)
            assert again.decide_nowait(DecisionIn(item.id, CAROL, "accept")).verdict is Verdict.REFUSED
            assert again.decide_nowait(DecisionIn(item.id, ALICE, "accept")).verdict is Verdict.CLAIMED
            ended = await handed.receive()
            tg.cancel_scope.cancel()
    assert isinstance(ended, ParkedEnded) and ended.outcome.approvals == (CAROL, ALICE)


async def test_a_card_anyone_may_answer_is_posted_and_one_person_decides() -> None:
    b, chat, _store = await broker()
    item = interaction(600, approvers=frozenset(), requester=None)
    results: list[Outcome] = []

    async def ask() -> None:
        results.append(await b.ask(item))

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask)
        await chat.wait_card()
        assert b.decide_nowait(DecisionIn(item.id, CAROL, "accept", {"n": 2})).verdict is Verdict.CLAIMED
    assert results[0].by == CAROL


async def test_a_decision_counts_only_once_the_store_says_it_won() -> None:
    # Another worker decided first: the store holds its outcome, this process has not heard yet.
    b, chat, store = await broker()
    item = interaction(600)
    results: list[Outcome] = []

    async def ask() -> None:
        results.append(await b.ask(item))

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask)
        await b.wait_open(item.id)
        assert await store.claim(item, Outcome(Status.DECLINED, by=BOB)) is True
        result = await b.decide(DecisionIn(item.id, ALICE, "accept", {"n": 3}))
    assert result.verdict is Verdict.LATE and result.message == "That request was already declined by Bob."
    assert chat.notices == [(ALICE, "That request was already declined by Bob.")]
    assert results[0].status is Status.DECLINED and results[0].by == BOB
    assert item.id not in chat.finished  # the card is the winner's to finish
    assert [(r.outcome, r.actor) for r in await store.audit_rows(item.id)] == [("declined", BOB.key)]


async def test_a_claim_answered_at_once_that_then_loses_is_told_as_late() -> None:
    b, chat, store = await broker()
    item = interaction(600)
    async with anyio.create_task_group() as tg:
        tg.start_soon(b.ask, item)
        await b.wait_open(item.id)
        assert await store.claim(item, Outcome(Status.EXPIRED, reason="nobody answered in time")) is True
        # A modal submission: answered within the ack from memory, before the store has been asked.
        assert b.decide_nowait(DecisionIn(item.id, ALICE, "accept", {"n": 3})).verdict is Verdict.CLAIMED
    assert item.id not in chat.finished  # the card is the winner's to finish
    assert chat.notices == [(ALICE, "That request was already expired.")]
    assert [r.outcome for r in await store.audit_rows(item.id)] == ["expired"]


async def test_a_parked_request_holds_no_task_and_expires_on_the_broker_s_one_timer() -> None:
    b, chat, store = await broker()
    item = interaction(3600)
    await store.save_pending_call(pending("call-1"))
    handoff, handed = handoff_stream()
    with handoff, handed:
        async with anyio.create_task_group() as tg:
            await tg.start(b.run, handoff)
            with pytest.raises(Parked):
                await b.ask(item, pending_call="call-1", input_key="k", park=True)
            assert b.statistics() == {"open": 1, "parked": 1} and item.id not in chat.finished
            started = anyio.current_time()
            ended = await handed.receive()
            assert anyio.current_time() - started > 3590  # virtual seconds: the one timer moved with the clock
            tg.cancel_scope.cancel()
    assert isinstance(ended, ParkedEnded)
    assert (ended.pending_call, ended.input_key, ended.outcome.status) == ("call-1", "k", Status.EXPIRED)
    assert chat.finished[item.id].status is Status.EXPIRED  # the card was finished before the call went on
    assert [r.outcome for r in await store.audit_rows(item.id)] == ["expired"]
