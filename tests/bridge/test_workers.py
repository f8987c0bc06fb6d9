"""Two bridge workers on one Postgres store, in one process: a click may reach either (both eras), expiry, and
a restart's take-over leaving the other worker's live work alone. (Killing a worker: tests/cli/test_workers.py.)"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import pytest

from bridge.config.team import ApproverRule
from bridge.door.model import CardRef, ConversationKey, DecisionIn, Interaction, MessageIn, Status, Verdict
from bridge.host import Host
from bridge.llm import HumanProvider
from bridge.storage import SqlStore, open_store
from tests.harness.hosts import ALICE, BOB, ROOM, FakeChatPort, config_for, host_for, patient
from tests.harness.postgres import PostgresCluster
from tests.servers.features import features_server
from tests.servers.inline import form_server, two_forms_server
from tests.storage.support import interaction, worker

pytestmark = pytest.mark.anyio

SCHEMA = json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
ERAS = ["legacy", "auto"]
QUORUM = ApproverRule((ALICE.key, BOB.key, "test:U-carol"), required=2, requester=False)


@asynccontextmanager
async def workers(url: str, protocol: str, **overrides: Any) -> AsyncIterator[list[tuple[Host, FakeChatPort]]]:
    """Two workers, "a" and "b", each with its own chat port (Slack would deliver to either)."""
    server = form_server()
    async with AsyncExitStack() as stack:
        started = []
        for name in ("a", "b"):
            store = await stack.enter_async_context(worker(url, name))
            host, chat = await host_for(config_for({"forms": server}, server_protocol=protocol, **overrides), store)
            await stack.enter_async_context(host)
            started.append((host, chat))
        yield started


async def card_on(host: Host, chat: FakeChatPort) -> Interaction:
    await host.handle_message(MessageIn(ROOM, ALICE, f"call forms fill {json.dumps({'schema': SCHEMA})}",
                                        explicit_command=True))
    card = await chat.wait_card()
    await host.broker.wait_open(card.id)
    return card


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_click_on_another_worker_counts_once_and_the_holder_answers_its_server(
        pg_url: str, protocol: str) -> None:
    async with workers(pg_url, protocol) as [(a, chat_a), (b, chat_b)]:
        with anyio.fail_after(patient(20)):
            card = await card_on(a, chat_a)
            assert b.broker.interaction(card.id) is None  # waited on by a only
            # Checking before opening a dialog never decides, wherever the card is held.
            assert (await b.check(card.id, ALICE)).verdict is Verdict.CLAIMED
            assert (await b.check(card.id, BOB)).verdict is Verdict.REFUSED
            assert a.broker.interaction(card.id) is not None and chat_b.notices[-1][0] == BOB
            assert (await b.decide(DecisionIn(card.id, BOB, "accept", {"n": 1}))).verdict is Verdict.REFUSED
            claimed = await b.decide(DecisionIn(card.id, ALICE, "accept", {"n": "7"}))
            late = await b.decide(DecisionIn(card.id, ALICE, "decline"))
            # A legacy call is answered by the worker holding its session; a parked 2026 call goes on where the
            # decision that answered its last card was claimed.
            done = await (chat_a if protocol == "legacy" else chat_b).wait_message("forms.fill:")
        audit = await a.store.audit_rows(card.id)
    assert claimed.verdict is Verdict.CLAIMED
    assert late.verdict is Verdict.LATE and late.message == "That request was already accepted by Alice."
    assert json.loads(done.split("\n", 1)[1])["content"] == {"n": 7}
    assert [(r.outcome, r.actor) for r in audit] == [("accepted", ALICE.key)]
    # One final card, by whichever worker won the claim: a for a legacy card (the decision was forwarded to it).
    finished = {**chat_a.finished, **chat_b.finished}
    assert finished[card.id].status is Status.ACCEPTED
    assert len(chat_a.finish_calls) + len(chat_b.finish_calls) == 1


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_card_expires_once_across_workers(pg_url: str, protocol: str) -> None:
    async with workers(pg_url, protocol, server_elicitation_timeout=1) as [(a, chat_a), (b, chat_b)]:
        with anyio.fail_after(patient(20)):
            card = await card_on(a, chat_a)
            await chat_a.wait_message("forms.fill:")
            assert (await b.decide(DecisionIn(card.id, ALICE, "accept", {"n": 1}))).verdict is Verdict.LATE
        audit = await a.store.audit_rows(card.id)
    assert [r.outcome for r in audit] == ["expired"]
    assert len(chat_a.finish_calls) + len(chat_b.finish_calls) == 1


async def test_a_starting_worker_leaves_a_live_worker_s_cards_alone(pg_url: str) -> None:
    async with workers(pg_url, "legacy") as [(a, chat_a), _]:
        with anyio.fail_after(patient(20)):
            card = await card_on(a, chat_a)
            store = await open_store(pg_url, worker_id="c")
            host, chat_c = await host_for(config_for({"forms": form_server()}), store)
            async with host:
                await host.resumed.wait()
            await store.aclose()
            assert a.broker.interaction(card.id) is not None and card.id not in chat_c.finished
            assert (await a.decide(DecisionIn(card.id, ALICE, "accept", {"n": 2}))).verdict is Verdict.CLAIMED
            await chat_a.wait_message("forms.fill:")


async def test_a_forwarded_decision_nobody_holds_is_not_counted(pg_url: str) -> None:
    # The worker holding a legacy card died (here: it never existed): the click is not counted, the card waits for
    # the survivor's take-over, which ends it as failed and tells the conversation.
    store = await open_store(pg_url, worker_id="gone")
    async with workers(pg_url, "legacy") as [_, (b, chat_b)]:
        with anyio.fail_after(patient(20)):
            item = interaction(expires_at=time.time() + 600)
            await store.save_interaction(item)
            result = await b.decide(DecisionIn(item.id, ALICE, "accept", {"n": 3}))
    await store.aclose()
    assert result.verdict is Verdict.LATE and "not answering" in result.message
    assert chat_b.notices == [(ALICE, result.message)]


async def test_a_worker_that_stops_hands_its_2026_calls_to_another_at_once(pg_url: str) -> None:
    server = form_server()
    stores = [await open_store(pg_url, worker_id=name) for name in ("a", "b")]
    try:
        b, chat_b = await host_for(config_for({"forms": server}, server_protocol="auto", worker_lease=3), stores[1])
        async with b:
            a, chat_a = await host_for(config_for({"forms": server}, server_protocol="auto"), stores[0])
            async with a:
                with anyio.fail_after(patient(20)):
                    card = await card_on(a, chat_a)
            # a stopped cleanly: its 2026 card stays open in the store and its lease ended, so b takes the call over.
            with anyio.fail_after(patient(20)):
                await b.broker.wait_open(card.id)
                assert (await b.decide(DecisionIn(card.id, ALICE, "accept", {"n": 5}))).verdict is Verdict.CLAIMED
                done = await chat_b.wait_message("forms.fill:")
            audit = await b.store.audit_rows(card.id)
    finally:
        for store in stores:
            await store.aclose()
    assert json.loads(done.split("\n", 1)[1])["content"] == {"n": 5}
    assert [(r.outcome, r.actor) for r in audit] == [("accepted", ALICE.key)]


@asynccontextmanager
async def quorum_workers(url: str, protocol: str) -> AsyncIterator[tuple[list[tuple[Host, FakeChatPort]], Any]]:
    """Workers "a" and "b" whose feat.wipe needs two approvers; and what the server ran."""
    server, seen = features_server()
    async with AsyncExitStack() as stack:
        started: list[tuple[Host, FakeChatPort]] = []
        for name in ("a", "b"):
            store = await stack.enter_async_context(worker(url, name))
            config = config_for({"feat": server}, server_protocol=protocol, server_tool_approvers=(("wipe", QUORUM),))
            chat = FakeChatPort()
            host = Host(config, store, llm=HumanProvider())
            host.attach(chat)
            await stack.enter_async_context(host)
            started.append((host, chat))
        yield started, seen


async def wipe_card(host: Host, chat: FakeChatPort) -> Interaction:
    await host.handle_message(MessageIn(ROOM, ALICE, 'call feat wipe {"target": "/srv"}', explicit_command=True))
    card = await chat.wait_card("tool")
    await host.broker.wait_open(card.id)
    return card


@pytest.mark.parametrize("protocol", ERAS)
async def test_approvals_of_several_clicked_on_another_worker_are_counted_where_the_card_is_held(
        pg_url: str, protocol: str) -> None:
    async with quorum_workers(pg_url, protocol) as ([(a, chat_a), (b, _)], seen):
        with anyio.fail_after(patient(20)):
            card = await wipe_card(a, chat_a)
            # Only the worker holding the card knows who approved so far: b passes each approval to it.
            assert (await b.decide(DecisionIn(card.id, ALICE, "accept"))).verdict is Verdict.COUNTED
            progress = await chat_a.wait_for(lambda: chat_a.updates[-1] if chat_a.updates else None)
            assert [x.key for x in progress.approvals] == [ALICE.key] and seen.ran == []
            assert (await b.decide(DecisionIn(card.id, BOB, "accept"))).verdict is Verdict.COUNTED
            await chat_a.wait_message("feat.wipe:")
            final = await chat_a.wait_finished(card.id)
        rows = await a.store.audit_rows(card.id)
    assert seen.ran == ["wipe /srv"] and [x.key for x in final.approvals] == [ALICE.key, BOB.key]
    assert [(r.outcome, r.actor) for r in rows] == [("approved", ALICE.key), ("accepted", BOB.key)]


async def test_an_approval_forwarded_while_the_holder_is_not_listening_is_counted_once_it_listens(
        pg_url: str, postgres: PostgresCluster) -> None:
    async with quorum_workers(pg_url, "legacy") as ([(a, chat_a), (b, _)], seen):
        with anyio.fail_after(patient(20)):
            card = await wipe_card(a, chat_a)
            # Every worker's forward listener is cut (as when its connection drops) and gone before b's click: b
            # tells Alice her approval counted, so a must count it once it listens again (it reconnects in 1 s).
            killed = postgres.psql("SELECT count(pg_terminate_backend(pid, 10000)) FROM pg_stat_activity"
                                   " WHERE query LIKE 'LISTEN %mcp_bridge_forward%'")
            assert killed == "2"
            assert (await b.decide(DecisionIn(card.id, ALICE, "accept"))).verdict is Verdict.COUNTED
            progress = await chat_a.wait_for(lambda: chat_a.updates[-1] if chat_a.updates else None)
            assert [x.key for x in progress.approvals] == [ALICE.key] and seen.ran == []
            assert (await b.decide(DecisionIn(card.id, BOB, "accept"))).verdict is Verdict.COUNTED
            final = await chat_a.wait_finished(card.id)
        rows = await a.store.audit_rows(card.id)
    # Counted once each (the reconnect's look and the poll take each forward once), in the order given.
    assert [x.key for x in final.approvals] == [ALICE.key, BOB.key] and seen.ran == ["wipe /srv"]
    assert [(r.outcome, r.actor) for r in rows] == [("approved", ALICE.key), ("accepted", BOB.key)]


@pytest.mark.parametrize("first", ["a", "b"])
async def test_a_round_answered_on_two_workers_goes_on_once_where_its_last_answer_was_claimed(
        pg_url: str, first: str) -> None:
    stores = [await open_store(pg_url, worker_id=name) for name in ("a", "b")]
    try:
        async with AsyncExitStack() as stack:
            hosts = []
            for store in stores:
                host, chat = await host_for(config_for({"pair": two_forms_server()}, server_protocol="auto"), store)
                await stack.enter_async_context(host)
                hosts.append((host, chat))
            (a, chat_a), (b, chat_b) = hosts
            with anyio.fail_after(patient(20)):
                await a.run_message(MessageIn(ROOM, ALICE, "call pair pair", explicit_command=True))
                cards = {c.message.rstrip("?"): c for c in chat_a.cards.values()}
                assert a.broker.statistics()["parked"] == 2 and b.broker.statistics()["parked"] == 0
                # Card "a" is clicked on worker a (which holds both), card "b" on worker b, in either order.
                on = {"a": a, "b": b}
                order = [first, "b" if first == "a" else "a"]
                for key in order:
                    result = await on[key].decide(DecisionIn(cards[key].id, ALICE, "accept", {key: f"by {key}"}))
                    assert result.verdict is Verdict.CLAIMED
                last = {"a": chat_a, "b": chat_b}[order[1]]
                text = await last.wait_message("pair.pair:\n")
            reported = [m for chat in (chat_a, chat_b) for m in chat.messages if m.text.startswith("pair.pair:")]
            rows = {key: await a.store.audit_rows(card.id) for key, card in cards.items()}
    finally:
        for store in stores:
            await store.aclose()
    assert json.loads(text.split("\n", 1)[1]) == {"a": {"a": "by a"}, "b": {"b": "by b"}}
    assert len(reported) == 1  # continued once, by one worker
    assert {key: [r.outcome for r in got] for key, got in rows.items()} == {"a": ["accepted"], "b": ["accepted"]}
    assert len(chat_a.finish_calls) + len(chat_b.finish_calls) == 2  # each card finished once, by its claimer


async def test_a_dead_worker_s_legacy_card_and_running_call_are_ended_and_told_once_by_a_survivor(pg_url: str) -> None:
    dead = await open_store(pg_url, worker_id="dead")
    other_room = ConversationKey("test", "W1", "C-other", "T1")
    card = interaction(expires_at=time.time() + 600, tool="wait_card")
    await dead.save_interaction(card)  # a legacy card: its server session died with the worker
    await dead.set_card(card.id, CardRef(card.id, {"ts": "1.1"}))
    await dead.record_running_call("c0ffee000002", card.conversation, "srv", "wait_card")
    await dead.record_running_call("c0ffee000003", other_room, "srv", "count_down")  # running, no card
    await dead.heartbeat(0)  # its lease ends now, as if it had been silent for the whole lease
    await dead.aclose()
    async with workers(pg_url, "legacy") as [(a, chat_a), (b, chat_b)]:
        with anyio.fail_after(patient(20)):
            await a.resumed.wait()
            await b.resumed.wait()
        said = [(m.conversation, m.text) for chat in (chat_a, chat_b) for m in chat.messages]
        rows = await a.store.audit_rows(card.id)
        assert isinstance(a.store, SqlStore)
        [(running,)] = await a.store.driver.fetch("SELECT count(*) FROM running_calls")
    told_card = [t for c, t in said if c == card.conversation]
    told_other = [t for c, t in said if c == other_room]
    assert len(told_card) == 1 and "no longer waiting for an answer" in told_card[0]
    assert told_other == ["srv.count_down was interrupted when the bridge stopped; run it again if it is still needed."]
    # The row names the tool whose card it was, as every tool call's audit row does.
    assert [(r.outcome, r.detail) for r in rows] == [("failed", "tool wait_card: the bridge stopped while this was "
                                                                "open; run the command again")]
    finished = {**chat_a.finished, **chat_b.finished}
    assert finished[card.id].status is Status.FAILED and running == 0
