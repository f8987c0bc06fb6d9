"""Restart with history: what a start reads to resume, with 1 000 pending 2026 calls next to 100 000 old rows.

One SQLite file is built in the schema of the release before (the old synchronous store, kept as
`tests/harness/legacy_store.py`, creates it; rows are bulk-inserted in its exact format): `--calls` pending calls,
each with its open card, and `--old` finished interactions from earlier calls, each with its audit row. Then, on
copies of that file and in one run:

* **baseline**: the old store opens it and reads what a restart reads: the pending calls, the open interactions,
  and for each call its interactions (this round's, and all of them);
* **whole start**: a `Host` on `bridge.storage` (the store the core uses) opens a copy (migrating it) and resumes
  everything (`Resumer.resume_all`: the take-over of what no worker holds, each call's round read back on its own,
  each open card parked again), until `host.resumed` is set; every call must be parked again;
* **SQLite**: `bridge.storage.open_store` does the same, first on the old file (the open includes migrating it),
  then again as a plain restart;
* **Postgres** (unless `--no-postgres` or the server binaries are missing): the same rows copied into a fresh
  database of a throwaway cluster (`tests/harness/postgres.py`), then a restart.

Every read is checked (each call finds its card); a wrong count exits 1. Run: `python -m bench.store_restart`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp.server.mcpserver import MCPServer

from bench.common import quiet_logs
from bridge.door.forms import form_from_schema
from bridge.door.model import Interaction, Kind, Outcome, ServerLabel, Status
from bridge.storage import PendingCall, SqlStore, open_store
from bridge.storage.codec import dump_interaction, dump_outcome, pending_values
from tests.harness.hosts import ALICE, ROOM, config_for, host_for
from tests.harness.legacy_store import Store

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "maximum": 9}}, "required": ["n"]}
REQUEST = {"method": "elicitation/create", "params": {"message": "How many?", "requestedSchema": SCHEMA}}
"""Each pending call's one input request (as the driver stores it): a form, whose card is open."""
COLUMNS = ("id", "conversation", "status", "body", "card", "pending_call", "input_key", "outcome", "created_at")


def item(interaction_id: str, expires_at: float) -> Interaction:
    return Interaction(id=interaction_id, kind=Kind.FORM, server=ServerLabel("srv", "Server"), conversation=ROOM,
                       requester=ALICE, approvers=frozenset({ALICE.key}), message="How many?",
                       form=form_from_schema(SCHEMA), expires_at=expires_at)


def rows(calls: int, old: int) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    """Pending-call rows and interaction rows (open cards of the pending calls first, then the old ones; each old one
    also has its audit row, written by `build`)."""
    now = time.time()
    pending: list[tuple[object, ...]] = []
    interactions: list[tuple[object, ...]] = []
    done = dump_outcome(Outcome(Status.ACCEPTED, {"n": 3}, ALICE))
    for c in range(calls):
        call = PendingCall(f"call-{c}", ROOM, "srv", "book", {"tag": str(c)}, "state", {"k": REQUEST}, ALICE)
        pending.append(pending_values(call, now - 3600 + c))
        body = dump_interaction(item(f"open-{c}", now + 86400))
        interactions.append((f"open-{c}", ROOM.id(), "open", body, json.dumps({"ts": str(c)}), f"call-{c}", "k", None,
                             now - 3600 + c + 0.5))
    template = dump_interaction(item("ID", now - 86400))
    for n in range(old):
        # Old 2026 calls with three inputs each, and legacy ones (no call), finished over the past months.
        call_id = f"old-call-{n // 3}" if n % 2 else None
        interactions.append((f"old-{n}", ROOM.id(), "accepted", template.replace('"ID"', f'"old-{n}"'), None, call_id,
                             "k" if call_id else None, done, now - 90 * 86400 + n))
    return pending, interactions


def build(path: Path, calls: int, old: int) -> None:
    Store(path).close()  # the schema of the release before, made by its code
    pending, interactions = rows(calls, old)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("BEGIN")
    db.executemany("INSERT INTO pending_calls VALUES (?,?,?,?,?,?,?,?,?)", pending)
    db.executemany(f"INSERT INTO interactions ({', '.join(COLUMNS)}) VALUES ({','.join('?' * len(COLUMNS))})",
                   interactions)
    # Each finished interaction's outcome in the audit log, as the broker writes it (history a start reads past).
    db.executemany("INSERT INTO audit (at, interaction_id, kind, server, conversation, outcome, actor, actor_name,"
                   " requester, detail) VALUES (?, ?, 'form', 'srv', ?, 'accepted', ?, 'Alice', ?, '')",
                   [(row[8], row[0], row[1], ALICE.key, ALICE.key) for row in interactions if row[2] != "open"])
    db.execute("COMMIT")
    db.close()


def check(pending: int, opened: int, per_call: list[int], calls: int) -> None:
    if pending != calls or opened != calls or per_call != [2] * calls:
        print(f"error: read {pending} calls, {opened} open cards, per call {set(per_call)}", file=sys.stderr)
        sys.exit(1)


def load_baseline(path: Path, calls: int) -> tuple[float, float]:
    t0 = time.perf_counter()
    store = Store(path)
    t1 = time.perf_counter()
    pending = store.pending_calls()
    opened = store.open_interactions()
    per_call = [len(store.interactions_for_call(p.id, since=p.created_at)) + len(store.interactions_for_call(p.id))
                for p in pending]
    t2 = time.perf_counter()
    store.close()
    check(len(pending), len(opened), per_call, calls)
    return t1 - t0, t2 - t1


async def host_start(path: Path, calls: int) -> tuple[float, float]:
    """Open the store, then start a host on it until every stored call is resumed (its card parked again)."""
    t0 = time.perf_counter()
    store = await open_store(path, worker_id="bench")
    t1 = time.perf_counter()
    try:
        host, chat = await host_for(config_for({"srv": MCPServer("srv")}), store)
        async with host:
            await host.resumed.wait()
            t2 = time.perf_counter()
            parked = host.broker.statistics()["parked"]
            told = [m.text for m in chat.messages]
    finally:
        await store.aclose()
    if parked != calls or told:
        print(f"error: {parked} of {calls} calls parked again; said: {told[:3]}", file=sys.stderr)
        sys.exit(1)
    return t1 - t0, t2 - t1


async def load_new(target: str, calls: int) -> tuple[float, float]:
    t0 = time.perf_counter()
    store = await open_store(target, worker_id="bench")
    t1 = time.perf_counter()
    try:
        pending = await store.pending_calls()
        opened = await store.open_interactions()
        per_call = [len(await store.interactions_for_call(p.id, since=p.created_at))
                    + len(await store.interactions_for_call(p.id)) for p in pending]
        t2 = time.perf_counter()
    finally:
        await store.aclose()
    check(len(pending), len(opened), per_call, calls)
    return t1 - t0, t2 - t1


async def fill_postgres(url: str, calls: int, old: int) -> None:
    store: SqlStore = await open_store(url, worker_id="loader")
    await store.aclose()
    import psycopg  # only with the postgres extra

    pending, interactions = rows(calls, old)
    async with await psycopg.AsyncConnection.connect(url) as conn:
        async with conn.cursor() as cur, cur.copy("COPY pending_calls (id, conversation, server, tool, arguments,"
                                                  " request_state, input_requests, requester, created_at)"
                                                  " FROM STDIN") as copy:
            for row in pending:
                await copy.write_row(row)
        async with conn.cursor() as cur, cur.copy(f"COPY interactions ({', '.join(COLUMNS)}, expires_at)"
                                                  " FROM STDIN") as copy:
            for row in interactions:
                await copy.write_row((*row, time.time() + 86400 if row[2] == "open" else None))
        await conn.commit()
        await conn.set_autocommit(True)
        await conn.execute("VACUUM ANALYZE")


def line(what: str, figures: tuple[float, float], baseline: float) -> None:
    total = sum(figures)
    print(f"{what:<34} {figures[0] * 1000:>9.1f} {figures[1] * 1000:>10.1f} {total * 1000:>10.1f}"
          f" {baseline / total:>10.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1000, help="pending 2026 calls, each with an open card")
    parser.add_argument("--old", type=int, default=100_000, help="old finished interaction rows")
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    args = parser.parse_args()
    quiet_logs()

    with tempfile.TemporaryDirectory(prefix="bench-restart-") as tmp:
        made = Path(tmp) / "made.db"
        t = time.perf_counter()
        build(made, args.calls, args.old)
        print(f"restart: {args.calls} pending calls next to {args.old} old interaction rows "
              f"(file {made.stat().st_size / 2**20:.0f} MiB, built in {time.perf_counter() - t:.1f} s)")
        copies = {}
        for name in ("baseline", "host", "new"):
            copies[name] = Path(tmp) / f"{name}.db"
            shutil.copy(made, copies[name])
        print(f"{'':<34} {'open ms':>9} {'load ms':>10} {'total ms':>10} {'speed-up':>11}")
        base = load_baseline(copies["baseline"], args.calls)
        line("old synchronous store (baseline)", base, sum(base))
        line("whole start: Host resumes all", anyio.run(host_start, copies["host"], args.calls), sum(base))
        line("SQLite, first open (migrates)", anyio.run(load_new, str(copies["new"]), args.calls), sum(base))
        line("SQLite, restart", anyio.run(load_new, str(copies["new"]), args.calls), sum(base))
        if not args.no_postgres:
            postgres(args, sum(base))


def postgres(args: argparse.Namespace, baseline: float) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.harness.postgres import PostgresCluster, PostgresUnavailable

    try:
        cluster = PostgresCluster(fsync=True)
    except PostgresUnavailable as exc:
        print(f"Postgres skipped: {exc}")
        return
    with cluster:
        url = cluster.create_database()
        anyio.run(fill_postgres, url, args.calls, args.old)
        line("Postgres, restart", anyio.run(load_new, url, args.calls), baseline)


if __name__ == "__main__":
    main()
