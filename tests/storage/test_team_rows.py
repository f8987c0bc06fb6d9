"""What the store keeps since team approvals and the audit chain, on both engines: grants, token usage, audit rows
linked in one chain also when several workers append at once, cards forgotten per platform."""

from __future__ import annotations

import dataclasses

import anyio
import pytest

from bridge.door.model import CardRef, ConversationKey, Outcome, Status
from bridge.storage import AuditRow, SqlStore, open_store
from bridge.storage import audit as chain
from tests.harness.hosts import patient
from tests.storage.support import accepted, interaction, pending

pytestmark = pytest.mark.anyio


def verified(rows: list[AuditRow]) -> chain.Verdict:
    """The rows of one chain, checked."""
    [number] = {r.chain for r in rows}
    return chain.verify(((r.id, [getattr(r, f) for f in chain.FIELDS], r.hash, r.key_id) for r in rows), chain=number)


async def test_grants_are_listed_until_they_expire_or_are_revoked(store: SqlStore) -> None:
    await store.save_grant("g1", "channel:test/w/c", None, '{"n": 1}')
    await store.save_grant("g2", "conversation:test/w/c/t", 100.0, '{"n": 2}')
    await store.save_grant("g3", "elsewhere", None, '{"n": 3}')
    places = ["conversation:test/w/c/t", "channel:test/w/c"]
    assert await store.grants(places, now=50.0) == ['{"n": 1}', '{"n": 2}']  # oldest first
    assert await store.grants(places, now=100.0) == ['{"n": 1}']  # g2 expired
    assert await store.revoke_grant("g1", "slack:U1") is True
    assert await store.revoke_grant("g1", "slack:U1") is False  # once
    assert await store.grants(places, now=50.0) == ['{"n": 2}'] and await store.grants([], now=0) == []


async def test_token_usage_adds_up_per_day_and_subject(store: SqlStore) -> None:
    await store.add_usage("2026-11-23", ["user:slack:U1", "conversation:c"], 120)
    await store.add_usage("2026-11-23", ["user:slack:U1"], 30)
    assert await store.usage("2026-11-23", "user:slack:U1") == 150
    assert await store.usage("2026-11-23", "conversation:c") == 120
    assert await store.usage("2026-11-24", "user:slack:U1") == 0


async def test_audit_rows_given_whole_and_claims_form_one_chain(store: SqlStore) -> None:
    item = interaction()
    await store.save_interaction(item)
    row = AuditRow(1.5, item.id, "tool", "ops", "test/w/c", "approved", "slack:U1", "Ada", None, "approval 1 of 2")
    await store.record(row)
    assert await store.claim(item, accepted(), "approvals 2 of 2")
    rows = await store.audit_rows()
    assert [(r.outcome, r.detail) for r in rows] == [("approved", "approval 1 of 2"),
                                                    ("accepted", "approvals 2 of 2")]
    assert dataclasses.replace(rows[0], id=0, hash="", chain=0) == row
    assert verified(rows).broken is None and verified(rows).rows == 2


async def test_cards_of_one_platform_are_forgotten_and_no_other(store: SqlStore) -> None:
    console = dataclasses.replace(interaction(), id="c1", conversation=ConversationKey("console", "local", "tty"))
    odd = dataclasses.replace(interaction(), id="c2", conversation=ConversationKey("con_ole", "local", "tty"))
    slack = interaction()
    await store.save_pending_call(pending("p1"))
    for item in (console, odd, slack):
        await store.save_interaction(item, pending_call="p1", input_key="k")
        await store.set_card(item.id, CardRef(item.id, {"ts": "1"}))
    assert await store.forget_cards("console") == 1  # `_` in a platform name is not a wildcard
    cards = {s.interaction.id: s.card for s in await store.open_interactions()}
    assert cards["c1"] is None and cards["c2"] is not None and cards[slack.id] is not None


async def test_workers_appending_at_once_keep_every_chain_unbroken(pg_target: str) -> None:
    workers = [await open_store(pg_target, worker_id=f"w{n}") for n in range(3)]
    try:
        items = [dataclasses.replace(interaction(), id=f"i{n}") for n in range(60)]
        for item in items:
            await workers[0].save_interaction(item)

        async def decide(n: int) -> None:
            store = workers[n % 3]
            await store.record(AuditRow(float(n), items[n].id, "tool", "s", "c", "approved", None, None, None, ""))
            await store.claim(items[n], Outcome(Status.DECLINED, reason=f"no {n}"))

        with anyio.fail_after(patient(60)):
            async with anyio.create_task_group() as tg:
                for n in range(len(items)):
                    tg.start_soon(decide, n)
        rows = sorted(await workers[1].audit_rows(), key=lambda r: (r.chain, r.id))
        assert len(rows) == 120
        verdicts = chain.verify_chains((r.chain, (r.id, [getattr(r, f) for f in chain.FIELDS], r.hash, r.key_id))
                                       for r in rows)
        assert len(verdicts) > 1 and all(v.broken is None for v in verdicts.values())
        assert sum(v.rows for v in verdicts.values()) == 120
    finally:
        for store in workers:
            await store.aclose()
