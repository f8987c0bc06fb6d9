"""The synchronous store `bridge.store` as it last shipped before `bridge.storage` took its place, frozen: it writes
files in the old format for the upgrade tests, and is the benches' baseline. Not used by the bridge.

Its original notes: one SQLite file (WAL mode) with the audit log, interactions, pending 2026 calls and
per-conversation data.

Calls are synchronous on purpose: each is a single small statement on a local file in WAL mode, synced on commit
(about a millisecond), cheap next to a chat round trip, and it keeps every write ordered with the event that caused
it. Every write commits at once, so nothing a person decided is lost if the process or the machine dies right
after.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bridge.door.model import CardRef, ConversationKey, Interaction, Outcome, Status
from bridge.observe import hooks as observe
from bridge.storage import audit as chain
from bridge.storage.codec import dump_actor, dump_interaction, dump_outcome, load_actor, load_interaction, load_outcome
from bridge.storage.rows import AuditRow, PendingCall, StoredInteraction

_SCHEMA = """
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    interaction_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    server TEXT NOT NULL,
    conversation TEXT NOT NULL,
    outcome TEXT NOT NULL,
    actor TEXT,
    actor_name TEXT,
    requester TEXT,
    detail TEXT NOT NULL DEFAULT '',
    hash TEXT
);
CREATE INDEX IF NOT EXISTS audit_interaction ON audit (interaction_id);
CREATE TABLE IF NOT EXISTS interactions (
    id TEXT PRIMARY KEY,
    conversation TEXT NOT NULL,
    status TEXT NOT NULL,
    body TEXT NOT NULL,
    card TEXT,
    pending_call TEXT,
    input_key TEXT,
    outcome TEXT,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS interactions_open ON interactions (status);
CREATE INDEX IF NOT EXISTS interactions_call ON interactions (pending_call, created_at);
CREATE TABLE IF NOT EXISTS running_calls (
    id TEXT PRIMARY KEY,
    conversation TEXT NOT NULL,
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    started_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS pending_calls (
    id TEXT PRIMARY KEY,
    conversation TEXT NOT NULL,
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    arguments TEXT NOT NULL,
    request_state TEXT,
    input_requests TEXT NOT NULL,
    requester TEXT,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS roots (
    conversation TEXT NOT NULL,
    uri TEXT NOT NULL,
    name TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (conversation, uri)
);
CREATE TABLE IF NOT EXISTS settings (
    conversation TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (conversation, key)
);
CREATE TABLE IF NOT EXISTS adapter_state (
    namespace TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (namespace, key)
);
CREATE TABLE IF NOT EXISTS grants (
    id TEXT PRIMARY KEY, place TEXT NOT NULL, expires_at REAL, revoked TEXT, body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS usage (
    day TEXT NOT NULL, subject TEXT NOT NULL, tokens INTEGER NOT NULL, PRIMARY KEY (day, subject)
);
CREATE TABLE IF NOT EXISTS history (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation TEXT NOT NULL,
    message TEXT NOT NULL
);
"""


class Store:
    """SQLite-backed persistence. One instance per process; `close()` when done."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        # FULL: a decision acknowledged in chat must survive a power cut too, not only a process crash.
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(_SCHEMA)
        self._chain_old_audit_rows()

    def close(self) -> None:
        self._db.close()

    def _write(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:  # one statement, autocommitted
        started = time.perf_counter()
        cursor = self._db.execute(sql, params)
        observe.store_committed(started)
        return cursor

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        started = time.perf_counter()
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")
        observe.store_committed(started)

    # -- audit ---------------------------------------------------------------------------------------------------

    def audit(self, interaction: Interaction, outcome: Outcome, detail: str = "") -> None:
        self.record(AuditRow(time.time(), interaction.id, interaction.kind.value, interaction.server.name,
                             interaction.conversation.id(), outcome.status.value,
                             outcome.by.key if outcome.by else None, outcome.by.label() if outcome.by else None,
                             interaction.requester.key if interaction.requester else None, detail or outcome.reason))

    def record(self, row: AuditRow) -> None:
        """One audit row as given: also what is not an interaction's end (one approval of several, a grant used).
        It is linked to the previous row in the hash chain (`bridge.storage.audit`)."""
        values = dataclasses.astuple(row)[:len(chain.FIELDS)]
        if self._db.in_transaction:
            self._append_audit(values)
        else:
            with self._tx():  # reading the last hash and appending after it must not interleave with another append
                self._append_audit(values)

    def _append_audit(self, values: tuple[Any, ...]) -> None:
        last = self._db.execute("SELECT hash FROM audit ORDER BY id DESC LIMIT 1").fetchone()
        self._db.execute(
            "INSERT INTO audit (at, interaction_id, kind, server, conversation, outcome, actor, actor_name, requester,"
            " detail, hash) VALUES (?,?,?,?,?,?,?,?,?,?,?)", (*values, chain.link(last[0] if last else None, values)))

    def _chain_old_audit_rows(self) -> None:
        """Stores written before the chain existed: add the column and link their rows, oldest first."""
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(audit)")}
        if "hash" in columns:
            return
        with self._tx() as db:
            db.execute("ALTER TABLE audit ADD COLUMN hash TEXT")
            unchained = db.execute(f"SELECT id, {', '.join(chain.FIELDS)} FROM audit WHERE hash IS NULL ORDER BY id"
                                   ).fetchall()
            for row in unchained:
                before = db.execute("SELECT hash FROM audit WHERE id < ? ORDER BY id DESC LIMIT 1",
                                    (row[0],)).fetchone()
                db.execute("UPDATE audit SET hash = ? WHERE id = ?",
                           (chain.link(before[0] if before else None, row[1:]), row[0]))

    def audit_rows(self, interaction_id: str | None = None) -> list[AuditRow]:
        query = f"SELECT {', '.join(chain.FIELDS)}, id, hash FROM audit"
        args: tuple[Any, ...] = ()
        if interaction_id is not None:
            query += " WHERE interaction_id = ?"
            args = (interaction_id,)
        return [AuditRow(*row) for row in self._db.execute(query + " ORDER BY id", args)]

    # -- interactions --------------------------------------------------------------------------------------------

    def save_interaction(self, interaction: Interaction, *, pending_call: str | None = None,
                         input_key: str | None = None) -> None:
        self._write(
            "INSERT INTO interactions (id, conversation, status, body, pending_call, input_key, created_at)"
            " VALUES (?,?,?,?,?,?,?)",
            (interaction.id, interaction.conversation.id(), Status.OPEN.value, dump_interaction(interaction),
             pending_call, input_key, time.time()),
        )

    def set_card(self, interaction_id: str, card: CardRef) -> None:
        self._write("UPDATE interactions SET card = ? WHERE id = ?", (json.dumps(dict(card.data)), interaction_id))

    def finish_interaction(self, interaction: Interaction, outcome: Outcome, detail: str = "") -> None:
        """Record the outcome and its audit row in one transaction, so the two never disagree."""
        with self._tx() as db:
            db.execute("UPDATE interactions SET status = ?, outcome = ? WHERE id = ?",
                       (outcome.status.value, dump_outcome(outcome), interaction.id))
            self.audit(interaction, outcome, detail)

    def forget_cards(self, platform: str) -> int:
        """Open interactions on `platform` lose their card, so that they are posted again when resumed: for a
        platform whose cards do not outlive the process (a terminal). Returns how many."""
        cur = self._write("UPDATE interactions SET card = NULL WHERE status = 'open' AND card IS NOT NULL"
                               " AND conversation LIKE ? ESCAPE '\\'", (_like_prefix(platform + "/"),))
        return cur.rowcount

    def interaction(self, interaction_id: str) -> StoredInteraction | None:
        row = self._db.execute(
            "SELECT body, status, card, pending_call, input_key, outcome, id FROM interactions WHERE id = ?",
            (interaction_id,)).fetchone()
        return _stored(row) if row else None

    def open_interactions(self) -> list[StoredInteraction]:
        rows = self._db.execute(
            "SELECT body, status, card, pending_call, input_key, outcome, id FROM interactions WHERE status = 'open'"
            " ORDER BY created_at").fetchall()
        return [_stored(row) for row in rows]

    def interactions_for_call(self, pending_call: str, since: float = 0.0) -> list[StoredInteraction]:
        rows = self._db.execute(
            "SELECT body, status, card, pending_call, input_key, outcome, id FROM interactions WHERE pending_call = ?"
            " AND created_at >= ? ORDER BY created_at", (pending_call, since)).fetchall()
        return [_stored(row) for row in rows]

    # -- pending 2026 calls --------------------------------------------------------------------------------------

    def save_pending_call(self, call: PendingCall) -> None:
        self._write(
            "INSERT OR REPLACE INTO pending_calls (id, conversation, server, tool, arguments, request_state,"
            " input_requests, requester, created_at) VALUES (?,?,?,?,?,?,?,?,?)",
            (call.id, call.conversation.id(), call.server, call.tool, json.dumps(dict(call.arguments)),
             call.request_state, json.dumps(dict(call.input_requests)), dump_actor(call.requester), time.time()),
        )

    def delete_pending_call(self, call_id: str) -> None:
        self._write("DELETE FROM pending_calls WHERE id = ?", (call_id,))

    def record_running_call(self, call_id: str, conversation: ConversationKey, server: str, tool: str) -> None:
        self._write("INSERT OR REPLACE INTO running_calls (id, conversation, server, tool, started_at)"
                    " VALUES (?,?,?,?,?)", (call_id, conversation.id(), server, tool, time.time()))

    def pending_calls(self) -> list[PendingCall]:
        rows = self._db.execute(
            "SELECT id, conversation, server, tool, arguments, request_state, input_requests, requester, created_at"
            " FROM pending_calls ORDER BY created_at").fetchall()
        return [PendingCall(r[0], ConversationKey.from_id(r[1]), r[2], r[3], json.loads(r[4]), r[5],
                            json.loads(r[6]), load_actor(r[7]), r[8]) for r in rows]

    # -- per-conversation data -----------------------------------------------------------------------------------

    def roots(self, conversation: ConversationKey) -> list[tuple[str, str]]:
        rows = self._db.execute("SELECT uri, name FROM roots WHERE conversation = ? ORDER BY rowid",
                                (conversation.id(),))
        return [(r[0], r[1]) for r in rows]

    def add_root(self, conversation: ConversationKey, uri: str, name: str) -> None:
        self._write("INSERT OR REPLACE INTO roots (conversation, uri, name) VALUES (?,?,?)",
                         (conversation.id(), uri, name))

    def remove_root(self, conversation: ConversationKey, uri: str) -> bool:
        cur = self._write("DELETE FROM roots WHERE conversation = ? AND uri = ?", (conversation.id(), uri))
        return cur.rowcount > 0

    def setting(self, conversation: ConversationKey, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM settings WHERE conversation = ? AND key = ?",
                               (conversation.id(), key)).fetchone()
        return str(row[0]) if row else None

    def set_setting(self, conversation: ConversationKey, key: str, value: str) -> None:
        self._write("INSERT OR REPLACE INTO settings (conversation, key, value) VALUES (?,?,?)",
                         (conversation.id(), key, value))

    # -- adapter-owned state ---------------------------------------------------------------------------------------

    def adapter_value(self, namespace: str, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM adapter_state WHERE namespace = ? AND key = ?",
                               (namespace, key)).fetchone()
        return str(row[0]) if row else None

    def set_adapter_value(self, namespace: str, key: str, value: str) -> None:
        self._write("INSERT OR REPLACE INTO adapter_state (namespace, key, value) VALUES (?,?,?)",
                         (namespace, key, value))

    # -- grants and token usage ----------------------------------------------------------------------------------

    def save_grant(self, grant_id: str, place: str, expires_at: float | None, body: str) -> None:
        self._write("INSERT INTO grants (id, place, expires_at, body) VALUES (?,?,?,?)",
                         (grant_id, place, expires_at, body))

    def grants(self, places: Sequence[str], now: float) -> list[str]:
        """Bodies of the grants in these places that are neither revoked nor expired at `now`, oldest first."""
        marks = ",".join("?" * len(places))
        return [r[0] for r in self._db.execute(
            f"SELECT body FROM grants WHERE place IN ({marks}) AND revoked IS NULL AND (expires_at IS NULL OR "
            "expires_at > ?) ORDER BY rowid", (*places, now))]

    def revoke_grant(self, grant_id: str, by: str) -> bool:
        return self._write("UPDATE grants SET revoked = ? WHERE id = ? AND revoked IS NULL",
                                (by, grant_id)).rowcount > 0

    def add_usage(self, day: str, subjects: Sequence[str], tokens: int) -> None:
        with self._tx() as db:
            db.executemany("INSERT INTO usage (day, subject, tokens) VALUES (?,?,?) ON CONFLICT (day, subject) DO"
                           " UPDATE SET tokens = tokens + excluded.tokens", [(day, s, tokens) for s in subjects])

    def usage(self, day: str, subject: str) -> int:
        row = self._db.execute("SELECT tokens FROM usage WHERE day = ? AND subject = ?", (day, subject)).fetchone()
        return int(row[0]) if row else 0

    def history(self, conversation: ConversationKey) -> list[dict[str, Any]]:
        rows = self._db.execute("SELECT message FROM history WHERE conversation = ? ORDER BY id",
                                (conversation.id(),))
        return [json.loads(r[0]) for r in rows]

    def append_history(self, conversation: ConversationKey, messages: Sequence[Mapping[str, Any]]) -> None:
        with self._tx() as db:
            db.executemany("INSERT INTO history (conversation, message) VALUES (?, ?)",
                           [(conversation.id(), json.dumps(dict(m))) for m in messages])

    def clear_history(self, conversation: ConversationKey) -> None:
        self._write("DELETE FROM history WHERE conversation = ?", (conversation.id(),))


def _stored(row: Any) -> StoredInteraction:
    body, status, card, pending_call, input_key, outcome, interaction_id = row
    return StoredInteraction(
        interaction=load_interaction(body), status=Status(status),
        card=CardRef(interaction_id, json.loads(card)) if card else None,
        pending_call=pending_call, input_key=input_key, outcome=load_outcome(outcome),
    )


def _like_prefix(text: str) -> str:
    """A LIKE pattern matching everything that starts with `text` (its own %, _ and \\ taken literally)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
