"""Claims on parked cards (a 2026 call's round, nobody waiting): the claim that answers the round's last open card is
the one that continues the call, exactly once across workers; and rows that cannot be read back are handed over
apart, closed and audited."""

from __future__ import annotations

import time

import anyio
import pytest

from bridge.door.model import Outcome, Status
from bridge.storage import SqlStore, Unreadable
from bridge.storage.driver import Step
from tests.harness.hosts import ROOM, patient
from tests.storage.support import accepted, interaction, pending, worker

pytestmark = pytest.mark.anyio


async def test_only_the_claim_of_the_round_s_last_open_card_continues_the_call(store: SqlStore) -> None:
    earlier = interaction()
    await store.save_pending_call(pending("call-1"))
    await store.save_interaction(earlier, pending_call="call-1", input_key="a", parked=True)
    await store.save_pending_call(pending("call-1"))  # the next round: stored before its cards
    a, b = interaction(), interaction()
    await store.save_interaction(a, pending_call="call-1", input_key="a", parked=True)
    await store.save_interaction(b, pending_call="call-1", input_key="b", parked=True)
    # A card of an earlier round is only retired: it answers nothing of this round.
    assert await store.claim_parked(earlier, Outcome(Status.CANCELLED), "", "call-1") == (True, False)
    assert await store.claim_parked(a, accepted(), "", "call-1") == (True, False)  # b is still open
    synced = store.durable_commits
    assert await store.claim_parked(b, accepted(n=4), "", "call-1") == (True, True)
    assert store.durable_commits == synced + 1  # the decision's one synced commit, which also tells it was last
    assert await store.claim_parked(b, accepted(n=5), "", "call-1") == (False, False)  # decided already
    stored = await store.interaction(b.id)
    assert stored is not None and stored.parked and stored.outcome == accepted(n=4)
    assert [r.outcome for r in await store.audit_rows(b.id)] == ["accepted"]


async def test_a_call_that_ended_is_never_continued_by_a_claim(store: SqlStore) -> None:
    await store.save_pending_call(pending("call-1"))
    card = interaction()
    await store.save_interaction(card, pending_call="call-1", input_key="a", parked=True)
    await store.delete_pending_call("call-1")  # stopped: its cards are withdrawn after this
    assert await store.claim_parked(card, Outcome(Status.CANCELLED), "", "call-1") == (True, False)


async def test_the_claim_that_continues_a_call_makes_it_its_worker_s(pg_target: str, pg_store: SqlStore) -> None:
    await pg_store.save_pending_call(pending("call-1"))
    card = interaction()
    await pg_store.save_interaction(card, pending_call="call-1", input_key="a", parked=True)
    async with worker(pg_target) as other:
        assert await other.claim_parked(card, accepted(), "", "call-1") == (True, True)
        [(owner,)] = await other.driver.fetch("SELECT worker FROM pending_calls WHERE id = 'call-1'")
    assert owner == "w2"


async def test_two_workers_answering_a_round_s_last_two_cards_at_once_continue_it_once(
        pg_target: str, pg_store: SqlStore) -> None:
    rounds = 40
    lasts: list[list[str]] = [[] for _ in range(rounds)]
    cards = []
    for n in range(rounds):
        await pg_store.save_pending_call(pending(f"call-{n}"))
        pair = (interaction(), interaction())
        for key, card in zip("ab", pair, strict=True):
            await pg_store.save_interaction(card, pending_call=f"call-{n}", input_key=key, parked=True)
        cards.append(pair)
    async with worker(pg_target) as other:

        async def claim(store: SqlStore, n: int, which: int) -> None:
            won, last = await store.claim_parked(cards[n][which], accepted(), "", f"call-{n}")
            assert won
            if last:
                lasts[n].append(store.worker_id)

        with anyio.fail_after(patient(60)):
            async with anyio.create_task_group() as tg:
                for n in range(rounds):
                    tg.start_soon(claim, pg_store, n, 0)
                    tg.start_soon(claim, other, n, 1)
    assert all(len(w) == 1 for w in lasts), lasts


async def test_unreadable_rows_are_handed_over_apart_and_closed_once_with_an_audit_row(store: SqlStore) -> None:
    good, bad = interaction(), interaction()
    await store.save_interaction(good)
    await store.save_interaction(bad)
    await store.save_pending_call(pending("call-1"))
    await store.driver.transaction([
        Step("UPDATE interactions SET body = '{not json' WHERE id = ?", (bad.id,)),
        Step("UPDATE pending_calls SET arguments = '{not json' WHERE id = 'call-1'"),
        Step("UPDATE interactions SET worker = NULL"), Step("UPDATE pending_calls SET worker = NULL")])
    assert [s.interaction.id for s in await store.open_interactions()] == [good.id]
    assert await store.interaction(bad.id) is None and await store.pending_calls() == []
    reaped = await store.reap_workers()
    assert [s.interaction.id for s in reaped.interactions] == [good.id] and reaped.pending_calls == ()
    assert {(u.table, u.id, u.conversation) for u in reaped.unreadable} == {
        ("interactions", bad.id, ROOM.id()), ("pending_calls", "call-1", ROOM.id())}
    for unreadable in reaped.unreadable:
        await store.close_unreadable(unreadable, "could not be restored")
        await store.close_unreadable(unreadable, "could not be restored")  # once only
    [row] = await store.audit_rows(bad.id)
    assert (row.outcome, row.kind, row.detail) == ("failed", "unreadable", "could not be restored")
    assert await store.driver.fetch("SELECT id FROM pending_calls") == []
    assert isinstance(reaped.unreadable[0], Unreadable)



async def test_a_stored_round_is_sent_by_exactly_one_process(target: str) -> None:
    async with worker(target, "w1") as first:
        await first.save_pending_call(pending("call-1"))
        [stored] = await first.pending_calls()
        assert stored.sent_by is None
        round_at = stored.created_at
        synced = first.durable_commits
        assert await first.send_round("call-1", round_at)
        assert first.durable_commits == synced + 1  # synced before the round goes out, as a decision is
        assert await first.send_round("call-1", round_at)  # its sender may send it again (its server died)
        sent_by = first.process_id
    # The same worker id, another process (a restart): the round may have reached the server, so it is not its.
    async with worker(target, "w1") as restarted:
        again = await restarted.pending_call("call-1")
        assert again is not None and again.sent_by == sent_by != restarted.process_id
        assert not await restarted.send_round("call-1", round_at)
        # Re-sending on purpose names the dead process it takes the round from.
        assert not await restarted.send_round("call-1", round_at, taking_from="w9/gone")
        assert await restarted.send_round("call-1", round_at, taking_from=sent_by)
        # An earlier round's answers never go out once the next round is stored, nor any once the call ended.
        await restarted.save_pending_call(pending("call-1"))
        newer = await restarted.pending_call("call-1")
        assert newer is not None and newer.sent_by is None and newer.created_at != round_at
        assert not await restarted.send_round("call-1", round_at)
        await restarted.delete_pending_call("call-1")
        assert not await restarted.send_round("call-1", newer.created_at)


async def test_of_two_workers_reaching_for_one_round_one_sends_it(pg_target: str) -> None:
    async with worker(pg_target, "a") as a, worker(pg_target, "b") as b:
        await a.save_pending_call(pending("call-1"))
        [stored] = await a.pending_calls()
        won: list[bool] = []

        async def send(store: SqlStore) -> None:
            won.append(await store.send_round("call-1", stored.created_at))

        async with anyio.create_task_group() as tg:
            tg.start_soon(send, a)
            tg.start_soon(send, b)
    assert sorted(won) == [False, True]


async def test_the_claim_that_answers_a_round_s_last_card_takes_its_sending_in_the_same_commit(target: str) -> None:
    async with worker(target, "w1") as store:
        await store.save_pending_call(pending("call-1"))
        a, b = interaction(), interaction()
        await store.save_interaction(a, pending_call="call-1", input_key="a", parked=True)
        await store.save_interaction(b, pending_call="call-1", input_key="b", parked=True)
        assert await store.claim_parked(a, accepted(), "", "call-1") == (True, False)
        before = await store.pending_call("call-1")
        assert before is not None and before.sent_by is None  # b is still open: nobody may send the round yet
        synced = store.durable_commits
        assert await store.claim_parked(b, accepted(), "", "call-1") == (True, True)
        assert store.durable_commits == synced + 1  # one synced commit: the decision, its audit row, the sending
        taken = await store.pending_call("call-1")
        assert taken is not None and taken.sent_by == store.process_id
        [(sent_at,)] = await store.driver.fetch("SELECT sent_at FROM pending_calls WHERE id = 'call-1'")
        assert sent_at is not None
        me = store.process_id
        # Sent by this process: the claim said so, no second commit; from here not given back even by a clean stop.
        assert await store.send_round("call-1", taken.created_at)
        assert store.durable_commits == synced + 1
    # Another process (a restart, a take-over) finds the round sent by a process that is gone.
    async with worker(target, "w1") as restarted:
        assert not await restarted.send_round("call-1", taken.created_at)
        assert await restarted.send_round("call-1", taken.created_at, taking_from=me)  # `on_interrupt: resend`


async def test_a_round_taken_and_not_sent_is_given_back_by_a_clean_stop_or_when_asked_again(target: str) -> None:
    async with worker(target, "w1") as store:
        await store.save_pending_call(pending("call-1"))
        card = interaction()
        await store.save_interaction(card, pending_call="call-1", input_key="a", parked=True)
        assert await store.claim_parked(card, accepted(), "", "call-1") == (True, True)
        [stored] = await store.pending_calls()
        assert stored.sent_by == store.process_id
    # Closed before it went out (a shutdown): the next process sends it, as a round never sent.
    async with worker(target, "w1") as restarted:
        assert (await restarted.pending_calls())[0].sent_by is None
        assert await restarted.send_round("call-1", stored.created_at)
        me = restarted.process_id
        await restarted.release_round("call-1", stored.created_at - 1)  # not this round: nothing given back
    async with worker(target, "w1") as other:
        await other.release_round("call-1", stored.created_at)  # given back only by the process that took it
        assert (await other.pending_calls())[0].sent_by == me
        # A round taken and asked again is given back by its taker.
        await other.save_pending_call(pending("call-1"))
        again = interaction()
        await other.save_interaction(again, pending_call="call-1", input_key="a", parked=True)
        assert await other.claim_parked(again, accepted(), "", "call-1") == (True, True)
        [taken] = await other.pending_calls()
        await other.release_round("call-1", taken.created_at)
        assert (await other.pending_calls())[0].sent_by is None


async def test_a_take_over_of_a_round_its_last_claim_took_never_sends_it_a_second_time(pg_target: str) -> None:
    async with worker(pg_target, "a") as a, worker(pg_target, "b") as b:
        await a.save_pending_call(pending("call-1"))
        card = interaction()
        await a.save_interaction(card, pending_call="call-1", input_key="k", parked=True)
        await a.heartbeat(30)
        await b.heartbeat(30)
        # a's claim answers the round and takes its sending; a take-over racing it (b) stops at the store.
        assert await a.claim_parked(card, accepted(), "", "call-1") == (True, True)
        [stored] = await b.pending_calls()
        assert not await b.send_round("call-1", stored.created_at)
        # a dies before sending: b reaps the call, and finds its round taken by a, as if it had been sent.
        await a.heartbeat(0, now=time.time() - 60)
        reaped = await b.reap_workers()
        [call] = reaped.pending_calls
        assert reaped.workers == ("a",) and call.sent_by == a.process_id
        assert not await b.send_round("call-1", call.created_at)  # `on_interrupt: tell`: told, not sent
        sends: list[bool] = []
        async with worker(pg_target, "c") as c:
            # `on_interrupt: resend`: re-sent on purpose, by exactly one of those reaching for it at once.
            async def resend(store: SqlStore) -> None:
                sends.append(await store.send_round("call-1", call.created_at, taking_from=call.sent_by))

            with anyio.fail_after(patient(20)):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(resend, b)
                    tg.start_soon(resend, c)
    assert sorted(sends) == [False, True]


async def test_a_worker_that_stalled_past_its_lease_asks_the_store_before_sending_a_round_its_claim_took(
        pg_target: str) -> None:
    async with worker(pg_target, "a") as a, worker(pg_target, "b") as b:
        await a.save_pending_call(pending("call-1"))
        card = interaction()
        await a.save_interaction(card, pending_call="call-1", input_key="k", parked=True)
        await b.heartbeat(30)
        await a.heartbeat(30)
        assert await a.claim_parked(card, accepted(), "", "call-1") == (True, True)
        # a stalls longer than its lease (its last heartbeat ran out a minute ago) before sending: b takes the call
        # over and, as `on_interrupt: resend` asks, sends the round itself.
        await a.heartbeat(30, now=time.time() - 90)
        [call] = (await b.reap_workers()).pending_calls
        assert await b.send_round("call-1", call.created_at, taking_from=call.sent_by)
        # a wakes up: the round its claim took is no longer its to send.
        assert not await a.send_round("call-1", call.created_at)
