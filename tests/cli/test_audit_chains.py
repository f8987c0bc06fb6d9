"""The audit log as several chains side by side (Postgres spreads rows over them, SQLite keeps one): decisions made at
once by two workers leave chains that `audit --verify` vouches for one by one; a row changed, removed, swapped or
moved in one chain, or cut from its end, is named with its chain; and a log written before there were chains is
migrated and verifies with the checkpoints shipped away then. Each on both engines where both apply; every check is a
real `mcp-chat-bridge audit` process."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bridge.door.model import Outcome, Status
from bridge.storage import audit as chain
from bridge.storage import open_store
from bridge.storage.audit_keys import PUBLIC_KEY_ENV, SIGNING_KEY_ENV, AuditSettings
from bridge.storage.driver import Driver, Step
from bridge.storage.migrations import MIGRATIONS, migrate
from tests.cli.test_audit_chain import audit, keys, random_key
from tests.harness.hosts import BOB, patient
from tests.storage.support import accepted, interaction

ENGINES = pytest.mark.parametrize("store_engine", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
                                  indirect=True)
COLUMNS = f"id, chain, {', '.join(chain.FIELDS)}, hash, key_id"
__all__ = ["keys"]  # the keys in the environment (fixture of tests.cli.test_audit_chain)


@contextmanager
def raw(target: str) -> Iterator[Any]:
    """The store as someone who can write it sees it: sqlite3 or psycopg, committing each statement."""
    if target.startswith("postgresql://"):
        with psycopg.connect(target, autocommit=True) as pg:
            yield pg
        return
    db = sqlite3.connect(target, isolation_level=None)
    try:
        yield db
    finally:
        db.close()


def sql(target: str, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    with raw(target) as db:
        cursor = db.execute(statement.replace("?", "%s") if target.startswith("postgresql://") else statement,
                            tuple(params))
        return list(cursor.fetchall()) if cursor.description else []


def restore(target: str, rows: list[tuple[Any, ...]]) -> None:
    """Put the audit table back as it was (ids and all)."""
    overriding = " OVERRIDING SYSTEM VALUE" if target.startswith("postgresql://") else ""
    sql(target, "DELETE FROM audit")
    for row in rows:
        sql(target, f"INSERT INTO audit ({COLUMNS}){overriding} VALUES ({', '.join('?' * len(row))})", row)


def decide_at_once(target: str, count: int, shipped: Path) -> int:
    """`count` decisions made at once: by two workers on Postgres, by one (its only writer) on SQLite; each signs the
    chains it wrote to every 3 rows and at its stop, into the store and `shipped`. How many workers decided."""
    return anyio.run(_decide_at_once, target, count, shipped)


async def _decide_at_once(target: str, count: int, shipped: Path) -> int:
    settings = AuditSettings.from_env(every=3, file=shipped)
    workers = 2 if target.startswith("postgresql://") else 1
    stores = [await open_store(target, worker_id=f"w{n}", audit=settings) for n in range(workers)]
    try:
        items = [interaction() for _ in range(count)]
        for item in items:
            await stores[0].save_interaction(item)

        async def decide(n: int) -> None:
            outcome = accepted() if n % 2 == 0 else Outcome(Status.DECLINED, None, BOB)
            assert await stores[n % workers].claim(items[n], outcome)

        with anyio.fail_after(patient(60)):
            async with anyio.create_task_group() as tg:
                for n in range(count):
                    tg.start_soon(decide, n)
    finally:
        for store in stores:
            await store.aclose()
    return workers


def chain_lines(stdout: str) -> dict[int, tuple[int, int, int]]:
    """Per chain of an intact log with several chains: rows, keyed rows, rows covered by a signed checkpoint."""
    found = re.findall(r"^chain (\d+): (\d+) rows, head \w+, (\d+) keyed, signed checkpoints cover rows 1-(\d+)$",
                       stdout, re.M)
    return {int(n): (int(rows), int(keyed), int(covered)) for n, rows, keyed, covered in found}


@ENGINES
def test_decisions_made_at_once_by_two_workers_leave_chains_that_verify(
        store_target: str, store_engine: str, tmp_path: Path, keys: dict[str, str]) -> None:
    shipped = tmp_path / "checkpoints.jsonl"
    decide_at_once(store_target, 40, shipped)
    result = audit("--store", store_target, "--verify", "--checkpoints", shipped)
    assert result.returncode == 0, result.stdout + result.stderr
    written = sql(store_target, "SELECT chain, count(*), count(DISTINCT key_id) FROM audit GROUP BY chain")
    if store_engine == "sqlite":  # one writer: one chain, reported as before there were several
        assert written == [(0, 40, 1)]
        assert result.stdout.startswith("OK: 40 rows, the chain is unbroken")
        assert "the newest covering rows 1-40" in result.stdout
        return
    # Two workers' rows went to the chains their cards picked, not to one chain each worker, nor all to one.
    assert len(written) > 2 and all(keyed == 1 for _, _, keyed in written)
    chains = chain_lines(result.stdout)
    assert result.stdout.startswith(f"OK: 40 rows in {len(written)} chains, each unbroken\n"), result.stdout
    # Every chain keyed throughout and signed up to its head (at each worker's clean stop, if not before).
    assert chains == {number: (rows, rows, rows) for number, rows, _ in written}
    shipped_chains = {json.loads(line)["chain"] for line in shipped.read_text().splitlines()}
    assert shipped_chains == set(chains)


@ENGINES
def test_a_row_changed_removed_swapped_moved_or_cut_from_one_chain_is_named(
        store_target: str, store_engine: str, tmp_path: Path, keys: dict[str, str]) -> None:
    shipped = tmp_path / "checkpoints.jsonl"
    decide_at_once(store_target, 40, shipped)
    saved = sql(store_target, f"SELECT {COLUMNS} FROM audit ORDER BY id")
    # The longest chain (on SQLite the only one) and its first rows' ids.
    [(number, _)] = sql(store_target, "SELECT chain, count(*) FROM audit GROUP BY chain ORDER BY count(*) DESC, chain"
                                      " LIMIT 1")
    ids = [r[0] for r in sql(store_target, "SELECT id FROM audit WHERE chain = ? ORDER BY id", (number,))]
    assert len(ids) >= 4
    where = f"chain {number}: " if store_engine == "postgres" else ""

    def broken(*extra: str | Path) -> str:
        result = audit("--store", store_target, "--verify", *extra)
        assert result.returncode == 1, result.stdout
        if store_engine == "postgres":  # the other chains are still vouched for
            assert result.stderr.startswith("BROKEN: 1 of "), result.stderr
            assert re.search(rf"^chain (?!{number}:)\d+: \d+ rows, head \w+, \d+ keyed", result.stderr, re.M)
        restore(store_target, saved)
        return result.stderr

    sql(store_target, "UPDATE audit SET detail = 'rewritten' WHERE id = ?", (ids[1],))
    assert f"{where}BROKEN at row 2 (id {ids[1]}): its fields or its hash were changed" in broken()
    sql(store_target, "DELETE FROM audit WHERE id = ?", (ids[1],))
    assert f"{where}BROKEN at row 2 (id {ids[2]})" in broken()
    # Rows 2 and 3 trade places (ids are the order): each now follows the wrong row.
    second, third = (sql(store_target, f"SELECT {', '.join(chain.FIELDS)}, hash FROM audit WHERE id = ?", (i,))[0]
                     for i in ids[1:3])
    assignments = ", ".join(f"{c} = ?" for c in (*chain.FIELDS, "hash"))
    sql(store_target, f"UPDATE audit SET {assignments} WHERE id = ?", (*third, ids[1]))
    sql(store_target, f"UPDATE audit SET {assignments} WHERE id = ?", (*second, ids[2]))
    assert f"{where}BROKEN at row 2 (id {ids[1]})" in broken()
    # The newest row cut off, the store's checkpoints with it: only the checkpoints shipped away can tell.
    sql(store_target, "DELETE FROM audit WHERE id = ?", (ids[-1],))
    sql(store_target, "DELETE FROM audit_checkpoints")
    assert audit("--store", store_target, "--verify").returncode == 0
    assert (f"{where}BROKEN at row {len(ids)} (id {ids[-2] + 1}): missing: the checkpoint of"
            in broken("--checkpoints", shipped))
    if store_engine == "postgres":
        # A row moved to another chain fits neither: the one it left has a gap, the one it joined a stranger.
        sql(store_target, "UPDATE audit SET chain = ? WHERE id = ?", (number + 1, ids[1]))
        result = audit("--store", store_target, "--verify")
        assert result.returncode == 1 and f"chain {number}: BROKEN at row 2 (id {ids[2]})" in result.stderr
        assert f"chain {number + 1}: BROKEN at row" in result.stderr
        restore(store_target, saved)
        # A chain removed whole, with the store's checkpoints: named by the checkpoints shipped away.
        sql(store_target, "DELETE FROM audit WHERE chain = ?", (number,))
        said = broken("--checkpoints", shipped)
        assert re.search(rf"^chain {number}: BROKEN at row 1 \(id \d+\): missing: the checkpoint of .* names "
                         rf"{len(ids)} rows up to id {ids[-1]}, the store has 0", said, re.M), said
    restore(store_target, saved)
    assert audit("--store", store_target, "--verify", "--checkpoints", shipped).returncode == 0


# -- a log written before there were chains ------------------------------------------------------------------------


def old_link(previous: str | None, values: Sequence[Any], key: bytes) -> str:
    """The row hash of the single chain, as the bridge wrote it before (frozen here, not imported)."""
    body = json.dumps([previous or "0" * 64, *values], ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return hmac.new(key, body, hashlib.sha256).hexdigest()


def old_checkpoint(signer: Ed25519PrivateKey, rows: int, row_id: int, head: str, at: int) -> dict[str, Any]:
    """A checkpoint line as the bridge shipped it before (frozen: no chain)."""
    message = f"mcp-chat-bridge audit checkpoint v1\n{rows}\n{row_id}\n{head}\n{at}".encode()
    return {"rows": rows, "row_id": row_id, "head": head, "at": at,
            "signature": base64.b64encode(signer.sign(message)).decode()}


async def write_old_log(driver: Driver, key: bytes, signer: Ed25519PrivateKey, count: int) -> dict[str, Any]:
    """A store at the schema before the audit chains with `count` keyed rows and a checkpoint of them; that
    checkpoint."""
    chains = next(m.version for m in MIGRATIONS if m.what == "several audit chains")
    assert await migrate(driver, tuple(m for m in MIGRATIONS if m.version < chains)) < chains
    key_id = hashlib.sha256(b"mcp-chat-bridge audit key id\x00" + key).hexdigest()[:16]
    previous: str | None = None
    for n in range(count):
        values = (1_700_000_000.5 + n, f"old{n}", "form", "srv", "slack/T1/C1/1.0", "accepted", "slack:U1", "Ada",
                  "slack:U2", "")
        previous = old_link(previous, values, key)
        await driver.transaction([Step(f"INSERT INTO audit ({', '.join(chain.FIELDS)}, hash, key_id)"
                                       " VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", (*values, previous, key_id))])
    assert previous is not None
    checkpoint = old_checkpoint(signer, count, count, previous, int(time.time()))
    await driver.transaction([Step("INSERT INTO audit_checkpoints (at, rows, row_id, head, signature)"
                                   " VALUES (?,?,?,?,?)", (checkpoint["at"], count, count, previous,
                                                           checkpoint["signature"]))])
    return checkpoint


async def _old_log(target: str, keys: dict[str, str], count: int) -> dict[str, Any]:
    key = base64.b64decode(keys[chain.KEY_ENV])
    signer = Ed25519PrivateKey.from_private_bytes(base64.b64decode(keys[SIGNING_KEY_ENV]))
    driver: Driver
    if target.startswith("postgresql://"):
        from bridge.storage.postgres import PostgresDriver

        driver = await PostgresDriver.open(target)
    else:
        from bridge.storage.sqlite import SqliteDriver

        driver = await SqliteDriver.open(target)
    try:
        return await write_old_log(driver, key, signer, count)
    finally:
        await driver.aclose()


@ENGINES
def test_a_log_of_one_chain_written_before_is_migrated_and_verifies(
        store_target: str, store_engine: str, tmp_path: Path, keys: dict[str, str]) -> None:
    shipped = tmp_path / "checkpoints.jsonl"
    checkpoint = anyio.run(_old_log, store_target, keys, 5)
    shipped.write_text(json.dumps(checkpoint) + "\n")
    assert audit("--store", store_target, "--verify", "--checkpoints", shipped).returncode == 0  # read as it is
    decide_at_once(store_target, 30, shipped)  # migrates, then goes on
    assert sql(store_target, "SELECT count(*) FROM audit WHERE chain = 0 AND id <= 5") == [(5,)]
    if store_engine == "postgres":
        # A worker of the earlier version left running cannot append to chain 0 after another chain's row.
        with pytest.raises(psycopg.errors.NotNullViolation):
            sql(store_target, f"INSERT INTO audit ({', '.join(chain.FIELDS)}, hash) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (1.0, "late", "form", "srv", "c", "accepted", None, None, None, "", "0" * 64))
    result = audit("--store", store_target, "--verify", "--checkpoints", shipped)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "is not signed" not in result.stdout + result.stderr  # the checkpoint signed before still holds
    if store_engine == "sqlite":  # chain 0 goes on after the old rows
        assert result.stdout.startswith("OK: 35 rows, the chain is unbroken")
    else:
        chains = chain_lines(result.stdout)
        assert result.stdout.startswith(f"OK: 35 rows in {len(chains)} chains, each unbroken\n"), result.stdout
        assert chains[0][0] >= 5 and sum(c[0] for c in chains.values()) == 35
        assert all(rows == keyed == covered for rows, keyed, covered in chains.values())
    # The old rows are still checked with the key: one changed is named.
    sql(store_target, "UPDATE audit SET outcome = 'declined' WHERE id = 3")
    result = audit("--store", store_target, "--verify", "--checkpoints", shipped)
    assert result.returncode == 1
    assert f"{'chain 0: ' if store_engine == 'postgres' else ''}BROKEN at row 3 (id 3)" in result.stderr


def test_chains_written_without_a_key_are_not_vouched_for_once_a_key_is_set(
        pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (chain.KEY_ENV, SIGNING_KEY_ENV, PUBLIC_KEY_ENV):
        monkeypatch.delenv(name, raising=False)
    decide_at_once(pg_url, 12, tmp_path / "checkpoints.jsonl")
    plain = audit("--store", pg_url, "--verify")
    assert plain.returncode == 0 and "warning: no row is keyed" in plain.stdout
    assert "NOT VOUCHED FOR: the rows after the newest checkpoint of chains" in plain.stdout
    keyed = audit("--store", pg_url, "--verify", env={**os.environ, chain.KEY_ENV: random_key()})
    assert keyed.returncode == 1
    assert re.search(r"^NOT VOUCHED FOR: MCP_BRIDGE_AUDIT_KEY is set, but no row in chains [\d, ]+ is keyed",
                     keyed.stderr, re.M), keyed.stderr
