"""Sign-ins in flight on record, on both engines: handed over once (a state used on one worker cannot be used on
another), taken once by the worker that started it, ended once, announced on the decisions channel (Postgres), and
the owner's liveness read with the row."""

from __future__ import annotations

import time

import anyio
import pytest

from bridge.storage import SqlStore
from bridge.storage.signin_rows import SIGNAL_PREFIX
from tests.harness.hosts import patient
from tests.storage.support import worker

pytestmark = pytest.mark.anyio


async def test_a_sign_in_is_handed_over_taken_and_ended_once(target: str, engine: str) -> None:
    expires = time.time() + 600
    async with worker(target, "a") as a:
        await a.save_signin("h1", "srv", "test:U-ada", expires)
        row = await a.signin("h1")
        assert row is not None and (row.server, row.person, row.worker, row.status) == ("srv", "test:U-ada", "a",
                                                                                         "pending")
        assert row.owner_alive and row.code is None and not row.ended
        assert await a.take_signin("h1") is None  # nothing handed over yet
        assert await a.return_signin("h1", "the-code", "https://as", None)
        assert not await a.return_signin("h1", "other", None, None)  # used: a replay changes nothing
        assert not await a.use_signin("h1")
        taken = await a.take_signin("h1")
        assert taken is not None and (taken.status, taken.code, taken.iss) == ("exchanging", "the-code", "https://as")
        assert await a.take_signin("h1") is None  # taken once
        assert await a.end_signin("h1", None)
        assert not await a.end_signin("h1", "too late")  # the first end counts
        ended = await a.signin("h1")
        assert ended is not None and ended.status == "signed_in" and ended.error is None and ended.code is None
        # The worker that started it receives the redirect itself: used once, then no hand-over.
        await a.save_signin("h2", "srv", "test:U-ada", expires)
        assert await a.use_signin("h2") and not await a.use_signin("h2")
        assert not await a.return_signin("h2", "code", None, None)
        assert await a.end_signin("h2", "the authorization server refused the sign-in to srv: access was declined")
        failed = await a.signin("h2")
        assert failed is not None and failed.status == "failed" and failed.error is not None
        # Expired: nothing is handed over, nor used.
        await a.save_signin("h3", "srv", "test:U-ada", time.time() - 1)
        assert not await a.return_signin("h3", "code", None, None) and not await a.use_signin("h3")
        assert await a.signin("unknown") is None
        stored = [r[0] for r in await a.driver.fetch("SELECT state_hash FROM signins ORDER BY state_hash")]
    assert stored == ["h1", "h2", "h3"]


async def test_only_the_worker_that_started_a_sign_in_takes_its_code_and_its_death_shows(pg_target: str) -> None:
    async with worker(pg_target, "a") as a, worker(pg_target, "b") as b:
        await a.save_signin("h", "srv", "test:U-ada", time.time() + 600)
        assert await b.return_signin("h", "code", None, None)
        assert await b.take_signin("h") is None  # not b's
        assert await a.take_signin("h") is not None
        await a.heartbeat(0)  # a's lease ends (a clean stop, or its lapse after a crash)
        row = await b.signin("h")
        assert row is not None and not row.owner_alive


async def test_changes_are_announced_on_the_decisions_channel(pg_store: SqlStore) -> None:
    heard: list[str] = []
    with anyio.fail_after(patient(10)):
        async with pg_store.decisions() as stream:
            await pg_store.save_signin("h", "srv", "test:U-ada", time.time() + 600)
            await pg_store.return_signin("h", "code", None, None)
            assert not await pg_store.return_signin("h", "again", None, None)  # nothing changed: nothing announced
            await pg_store.end_signin("h", None)
            async for payload in stream:
                heard.append(payload)
                if len(heard) == 2:
                    break
    assert heard == [SIGNAL_PREFIX + "h"] * 2
