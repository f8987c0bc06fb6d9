"""The audit log against someone who can write the store: a keyed chain nobody without the key can recompute, hashes
removed that no restart puts back, signed checkpoints kept away from the store that catch rows cut from the end and a
store rolled back, and `audit` on a Postgres store that never prints its password. Every check is a real
`mcp-chat-bridge audit` process; the bridge that writes is the store `run` opens, or a real `run` process."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import anyio
import psycopg
import pytest
import yaml

from bridge.cli.entry import open_store as open_run_store
from bridge.config.file import from_mapping
from bridge.door.model import Outcome, Status
from bridge.storage import audit as chain
from bridge.storage.audit_keys import PUBLIC_KEY_ENV, SIGNING_KEY_ENV
from tests.cli.test_run import start
from tests.harness.console_run import wait_line
from tests.harness.hosts import BOB
from tests.storage.support import accepted, interaction

KEYS = (chain.KEY_ENV, SIGNING_KEY_ENV, PUBLIC_KEY_ENV)
OUTCOME = chain.FIELDS.index("outcome")


def random_key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """An HMAC key and a signing key in this process's environment (and so in every process it starts)."""
    values = {chain.KEY_ENV: random_key(), SIGNING_KEY_ENV: random_key()}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv(PUBLIC_KEY_ENV, raising=False)
    yield values


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in KEYS:
        monkeypatch.delenv(name, raising=False)


def audit(*args: str | Path, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bridge.cli", "audit", *map(str, args)], capture_output=True,
                          text=True, env=dict(os.environ if env is None else env), timeout=120, check=False)


def decide(target: str | Path, count: int, **audit_block: object) -> None:
    """`count` decisions (Ada accepts, Bob declines, in turn) through the store `run` opens for this config."""
    anyio.run(_decide, str(target), count, audit_block)


async def _decide(target: str, count: int, audit_block: dict[str, object]) -> None:
    config = from_mapping({"store": target, **({"audit": audit_block} if audit_block else {})})
    store = await open_run_store(config)
    try:
        for n in range(count):
            card = interaction()
            await store.save_interaction(card)
            assert await store.claim(card, accepted() if n % 2 == 0 else Outcome(Status.DECLINED, None, BOB))
    finally:
        await store.aclose()


def rows(db: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as raw:
        return raw.execute(f"SELECT id, {', '.join(chain.FIELDS)}, hash FROM audit ORDER BY id").fetchall()


def rechain(db: Path, edit: Mapping[int, str], *, from_id: int = 1, key_id: bool = True) -> None:
    """What someone who can write the file does: change outcomes and recompute every hash from `from_id` on with the
    published hash function (they lack the key)."""
    with sqlite3.connect(db) as raw:
        previous: str | None = None
        for row in rows(db):
            row_id, values, stored = int(str(row[0])), list(row[1:-1]), str(row[-1])
            if row_id < from_id:
                previous = stored
                continue
            values[OUTCOME] = edit.get(row_id, values[OUTCOME])
            previous = chain.link(previous, values)
            raw.execute(f"UPDATE audit SET outcome = ?, hash = ?{'' if key_id else ', key_id = NULL'} WHERE id = ?",
                        (values[OUTCOME], previous, row_id))


def test_a_decline_rewritten_with_the_public_hash_function_no_longer_verifies(tmp_path: Path,
                                                                              keys: dict[str, str]) -> None:
    db = tmp_path / "bridge.db"
    decide(db, 4)
    assert audit("--store", db, "--verify").returncode == 0
    rechain(db, {2: "accepted"}, from_id=2)  # Bob's decline becomes an acceptance; the hashes after it follow
    result = audit("--store", db, "--verify")
    assert result.returncode == 1
    assert "BROKEN at row 2 (id 2)" in result.stderr and "the 1 rows before it are intact" in result.stderr
    rechain(db, {2: "accepted"}, from_id=2, key_id=False)  # claiming the rows were never keyed does not help
    assert "hashed without a key after keyed rows" in audit("--store", db, "--verify").stderr
    # Nor does rewriting the whole log unkeyed, its checkpoints removed: with the key at hand nothing vouches for it.
    rechain(db, {2: "accepted"}, key_id=False)
    with sqlite3.connect(db) as raw:
        raw.execute("DELETE FROM audit_checkpoints")
    result = audit("--store", db, "--verify")
    assert result.returncode == 1 and "NOT VOUCHED FOR" in result.stderr


def test_hashes_removed_are_not_put_back_by_a_restart(tmp_path: Path, no_keys: None) -> None:
    db = tmp_path / "bridge.db"
    decide(db, 3)
    with sqlite3.connect(db) as raw:
        raw.execute("UPDATE audit SET outcome = 'accepted' WHERE id = 2")
        raw.execute("UPDATE audit SET hash = NULL WHERE id >= 2")
    assert "BROKEN at row 2 (id 2): has no hash" in audit("--store", db, "--verify").stderr
    config = tmp_path / "bridge.yaml"
    config.write_text(yaml.safe_dump({"store": str(db), "chat": {"console": {}}}))
    run = subprocess.Popen([sys.executable, "-m", "bridge.cli", "run", "-c", str(config)], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert run.stdout is not None and run.stdin is not None
    assert "on the console" in run.stdout.readline()  # started: the store is open and migrated
    run.stdin.close()  # end of input ends the console and the bridge
    assert run.wait(timeout=60) == 0, run.stderr.read() if run.stderr else ""
    for pipe in (run.stdout, run.stderr):
        if pipe is not None:
            pipe.close()
    result = audit("--store", db, "--verify")
    assert result.returncode == 1 and "BROKEN at row 2 (id 2): has no hash" in result.stderr
    assert "warning: no row is keyed" not in result.stdout  # said for an intact unkeyed log only


def test_checkpoints_kept_away_catch_rows_cut_from_the_end(tmp_path: Path, keys: dict[str, str]) -> None:
    db, shipped = tmp_path / "bridge.db", tmp_path / "checkpoints.jsonl"
    decide(db, 5, checkpoint_every=2, checkpoint_file=str(shipped))
    # Every second row, and the clean stop after the fifth.
    assert [json.loads(line)["rows"] for line in shipped.read_text().splitlines()] == [2, 4, 5]
    result = audit("--store", db, "--verify", "--checkpoints", shipped)
    assert result.returncode == 0, result.stderr
    assert "checkpoints: 3 signed, the newest covering rows 1-5" in result.stdout
    # Someone who holds even the HMAC key drops the last two rows and the checkpoints the store keeps.
    with sqlite3.connect(db) as raw:
        raw.execute("DELETE FROM audit WHERE id > 3")
        raw.execute("DELETE FROM audit_checkpoints")
    assert audit("--store", db, "--verify").returncode == 0  # the store alone cannot tell
    result = audit("--store", db, "--verify", "--checkpoints", shipped)
    assert result.returncode == 1
    assert "BROKEN at row 4 (id 4): missing: the checkpoint of" in result.stderr
    assert "names 5 rows up to id 5, the store has 3" in result.stderr
    # A checkpoint written by someone without the signing key is refused, not trusted.
    forged = json.loads(shipped.read_text().splitlines()[0]) | {"rows": 1, "row_id": 1}
    (tmp_path / "forged.jsonl").write_text(json.dumps(forged) + "\n")
    result = audit("--store", db, "--verify", "--checkpoints", tmp_path / "forged.jsonl")
    assert result.returncode == 1 and "is not signed by the audit signing key" in result.stderr


def test_checkpoints_kept_away_catch_a_store_rolled_back_to_a_copy(tmp_path: Path, keys: dict[str, str]) -> None:
    db, shipped, copy = tmp_path / "bridge.db", tmp_path / "checkpoints.jsonl", tmp_path / "copy.db"
    decide(db, 3, checkpoint_every=2, checkpoint_file=str(shipped))
    shutil.copyfile(db, copy)
    decide(db, 2, checkpoint_every=2, checkpoint_file=str(shipped))  # rows 4 and 5, signed at 5...
    shutil.copyfile(copy, db)  # ...the store is put back to the copy,
    decide(db, 2, checkpoint_every=2, checkpoint_file=str(tmp_path / "elsewhere.jsonl"))  # and history goes on
    assert audit("--store", db, "--verify").returncode == 0  # a valid chain, keyed with the right key
    # Those who only verify hold the public key, not the signing key.
    public = audit("--public-key-of-signing-key").stdout.strip()
    env = {k: v for k, v in os.environ.items() if k != SIGNING_KEY_ENV}
    result = audit("--store", db, "--verify", "--checkpoints", shipped, "--public-key", public, env=env)
    assert result.returncode == 1
    # Named: the first row after the newest checkpoint that still holds (the copy's end).
    assert "BROKEN at row 4 (id 4): the checkpoint of" in result.stderr
    assert "names another history at row 5 (id 5" in result.stderr
    assert "the 3 rows before it are intact" in result.stderr


def test_a_clean_stop_of_run_signs_the_head_into_the_log_and_the_file(tmp_path: Path, keys: dict[str, str]) -> None:
    shipped = tmp_path / "checkpoints.jsonl"
    proc, lines, db, reader = start(tmp_path, "legacy", audit={"checkpoint_file": str(shipped)})
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.write("!mcp call demo plan_trip\n")
    proc.stdin.flush()
    wait_line(lines, "asks you to fill in a form")
    proc.send_signal(signal.SIGTERM)  # the card is cancelled (one audit row), then the store closes
    proc.wait(timeout=60)
    err = proc.stderr.read()
    reader.join(timeout=10)
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        pipe.close()
    assert proc.returncode == 0, err
    [line] = shipped.read_text().splitlines()
    record = json.loads(line)
    assert (record["rows"], record["row_id"]) == (1, 1)
    logged = [json.loads(entry) for entry in err.splitlines() if entry.startswith("{")]
    assert any(e["message"] == f"audit checkpoint {line}" and e["level"] == "INFO" for e in logged)
    assert keys[chain.KEY_ENV] not in err and keys[SIGNING_KEY_ENV] not in err
    result = audit("--store", db, "--verify", "--checkpoints", shipped)
    assert result.returncode == 0 and "the newest covering rows 1-1" in result.stdout


def test_audit_reads_and_verifies_a_postgres_store_and_never_prints_its_password(
        tmp_path: Path, pg_url: str, keys: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    # The throwaway cluster trusts local connections: the password is carried, never needed.
    user, rest = pg_url.split("@", 1)
    url = f"{user}:supersecret123@{rest}"
    decide(url, 4)  # signed at the clean stop
    config = tmp_path / "bridge.yaml"
    config.write_text("store: ${BRIDGE_STORE}\nchat: {console: {}}\n")
    monkeypatch.setenv("BRIDGE_STORE", url)
    listed = audit("-c", config, "--json")
    assert listed.returncode == 0, listed.stderr
    assert [json.loads(line)["outcome"] for line in listed.stdout.splitlines()] == [
        "accepted", "declined", "accepted", "declined"]
    verified = audit("-c", config, "--verify")
    assert verified.returncode == 0, verified.stderr
    # The rows are spread over the chains their interactions pick, each chain signed at the clean stop.
    chains = re.findall(r"^chain (\d+): (\d+) rows, head \w+, (\d+) keyed, signed checkpoints cover rows 1-(\d+)$",
                        verified.stdout, re.M)
    assert verified.stdout.startswith(f"OK: 4 rows in {len(chains)} chains, each unbroken\n"), verified.stdout
    assert sum(int(c[1]) for c in chains) == 4 and all(c[1] == c[2] == c[3] for c in chains), verified.stdout
    assert f"checkpoints: {len(chains)} signed" in verified.stdout
    with psycopg.connect(pg_url, autocommit=True) as raw:
        raw.execute("UPDATE audit SET outcome = 'accepted' WHERE id = 2")
        number, position = raw.execute("SELECT chain, (SELECT count(*) FROM audit b WHERE b.chain = a.chain AND"
                                       " b.id <= a.id) FROM audit a WHERE id = 2").fetchone() or (None, None)
    broken = audit("-c", config, "--verify")
    assert broken.returncode == 1 and f"chain {number}: BROKEN at row {position} (id 2)" in broken.stderr
    monkeypatch.setenv("BRIDGE_STORE", "postgresql://bridge:supersecret123@127.0.0.1:1/bridge")
    unreachable = audit("-c", config)
    assert unreachable.returncode != 0 and "127.0.0.1" in unreachable.stderr
    assert "Traceback" not in unreachable.stderr
    for result in (listed, verified, broken, unreachable):
        assert "supersecret123" not in result.stdout + result.stderr


def test_a_keyed_log_is_not_continued_without_its_key(tmp_path: Path, keys: dict[str, str]) -> None:
    db, config = tmp_path / "bridge.db", tmp_path / "bridge.yaml"
    decide(db, 1)
    config.write_text(yaml.safe_dump({"store": str(db), "chat": {"console": {}}}))
    env = {k: v for k, v in os.environ.items() if k not in KEYS}
    checked = subprocess.run([sys.executable, "-m", "bridge.cli", "check-config", str(config)], capture_output=True,
                             text=True, env=env, timeout=60, check=False)
    assert checked.returncode == 0
    assert "warning: audit: MCP_BRIDGE_AUDIT_KEY is not set: the audit chain is unkeyed" in checked.stderr
    # Unkeyed rows after keyed ones are what a forger without the key writes: the bridge does not write them.
    run = subprocess.run([sys.executable, "-m", "bridge.cli", "run", "-c", str(config)], capture_output=True,
                         text=True, env=env, stdin=subprocess.DEVNULL, timeout=60, check=False)
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1
    assert "MCP_BRIDGE_AUDIT_KEY: the audit log is keyed" in run.stderr
    assert keys[chain.KEY_ENV] not in run.stderr + checked.stderr
    bad = dict(env, **{chain.KEY_ENV: "not-a-key"})
    result = audit("--store", db, "--verify", env=bad)
    assert result.returncode == 2 and "MCP_BRIDGE_AUDIT_KEY: each key must be 32 random bytes" in result.stderr


def test_run_without_keys_says_once_what_its_audit_log_lacks(tmp_path: Path, no_keys: None) -> None:
    proc, lines, _db, reader = start(tmp_path, "legacy")
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    for _ in range(2):
        proc.stdin.write("!mcp call demo plan_trip\n")
        proc.stdin.flush()
        wait_line(lines, "asks you to fill in a form")
        proc.stdin.write("!mcp cancel\n")
        proc.stdin.flush()
        wait_line(lines, "cancel")
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    err = proc.stderr.read()
    reader.join(timeout=10)
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        pipe.close()
    assert proc.returncode == 0, err
    warned = [json.loads(e)["message"] for e in err.splitlines() if e.startswith("{") and "audit:" in e]
    assert warned == [
        "audit: MCP_BRIDGE_AUDIT_KEY is not set: the audit chain is unkeyed, so anyone who can write the store can "
        "rewrite it unseen",
        "audit: MCP_BRIDGE_AUDIT_SIGNING_KEY is not set: no signed checkpoints, so rows removed from the end or a "
        "store rolled back to a copy go unseen"]
