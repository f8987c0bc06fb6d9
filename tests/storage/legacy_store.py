"""The synchronous store `bridge.store` as it shipped before `bridge.storage`, frozen: it writes files in the old
format for the upgrade tests, and is the benches' baseline. Not used by the bridge.

Its original notes: one SQLite file (WAL mode) with the audit log, interactions, pending 2026 calls and
per-conversation data.

Calls are synchronous on purpose: each is a single small statement on a local file in WAL mode, synced on commit
(about a millisecond), cheap next to a chat round trip, and it keeps every write ordered with the event that caused
it. Every write commits at once, so nothing a person decided is lost if the process or the machine dies right
after.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bridge.forms import Form, form_from_schema
from bridge.model import (
    Actor,
    CardRef,
    ConversationKey,
    Detail,
    Interaction,
    Kind,
    Outcome,
    ServerLabel,
    Status,
)
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
    detail TEXT NOT NULL DEFAULT ''
);
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

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # -- audit ---------------------------------------------------------------------------------------------------

    def audit(self, interaction: Interaction, outcome: Outcome, detail: str = "") -> None:
        self._db.execute(
            "INSERT INTO audit (at, interaction_id, kind, server, conversation, outcome, actor, actor_name, requester,"
            " detail) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (time.time(), interaction.id, interaction.kind.value, interaction.server.name,
             interaction.conversation.id(), outcome.status.value,
             outcome.by.key if outcome.by else None, outcome.by.label() if outcome.by else None,
             interaction.requester.key if interaction.requester else None, detail or outcome.reason),
        )

    def audit_rows(self, interaction_id: str | None = None) -> list[AuditRow]:
        query = "SELECT at, interaction_id, kind, server, conversation, outcome, actor, actor_name, requester, detail" \
                " FROM audit"
        args: tuple[Any, ...] = ()
        if interaction_id is not None:
            query += " WHERE interaction_id = ?"
            args = (interaction_id,)
        return [AuditRow(*row) for row in self._db.execute(query + " ORDER BY id", args)]

    # -- interactions --------------------------------------------------------------------------------------------

    def save_interaction(self, interaction: Interaction, *, pending_call: str | None = None,
                         input_key: str | None = None) -> None:
        self._db.execute(
            "INSERT INTO interactions (id, conversation, status, body, pending_call, input_key, created_at)"
            " VALUES (?,?,?,?,?,?,?)",
            (interaction.id, interaction.conversation.id(), Status.OPEN.value, _dump_interaction(interaction),
             pending_call, input_key, time.time()),
        )

    def set_card(self, interaction_id: str, card: CardRef) -> None:
        self._db.execute("UPDATE interactions SET card = ? WHERE id = ?", (json.dumps(dict(card.data)), interaction_id))

    def finish_interaction(self, interaction: Interaction, outcome: Outcome, detail: str = "") -> None:
        """Record the outcome and its audit row in one transaction, so the two never disagree."""
        with self._tx() as db:
            db.execute("UPDATE interactions SET status = ?, outcome = ? WHERE id = ?",
                       (outcome.status.value, _dump_outcome(outcome), interaction.id))
            self.audit(interaction, outcome, detail)

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
        self._db.execute(
            "INSERT OR REPLACE INTO pending_calls (id, conversation, server, tool, arguments, request_state,"
            " input_requests, requester, created_at) VALUES (?,?,?,?,?,?,?,?,?)",
            (call.id, call.conversation.id(), call.server, call.tool, json.dumps(dict(call.arguments)),
             call.request_state, json.dumps(dict(call.input_requests)), _dump_actor(call.requester), time.time()),
        )

    def delete_pending_call(self, call_id: str) -> None:
        self._db.execute("DELETE FROM pending_calls WHERE id = ?", (call_id,))

    def pending_calls(self) -> list[PendingCall]:
        rows = self._db.execute(
            "SELECT id, conversation, server, tool, arguments, request_state, input_requests, requester, created_at"
            " FROM pending_calls ORDER BY created_at").fetchall()
        return [PendingCall(r[0], ConversationKey.from_id(r[1]), r[2], r[3], json.loads(r[4]), r[5],
                            json.loads(r[6]), _load_actor(r[7]), r[8]) for r in rows]

    # -- per-conversation data -----------------------------------------------------------------------------------

    def roots(self, conversation: ConversationKey) -> list[tuple[str, str]]:
        rows = self._db.execute("SELECT uri, name FROM roots WHERE conversation = ? ORDER BY rowid",
                                (conversation.id(),))
        return [(r[0], r[1]) for r in rows]

    def add_root(self, conversation: ConversationKey, uri: str, name: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO roots (conversation, uri, name) VALUES (?,?,?)",
                         (conversation.id(), uri, name))

    def remove_root(self, conversation: ConversationKey, uri: str) -> bool:
        cur = self._db.execute("DELETE FROM roots WHERE conversation = ? AND uri = ?", (conversation.id(), uri))
        return cur.rowcount > 0

    def setting(self, conversation: ConversationKey, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM settings WHERE conversation = ? AND key = ?",
                               (conversation.id(), key)).fetchone()
        return str(row[0]) if row else None

    def set_setting(self, conversation: ConversationKey, key: str, value: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO settings (conversation, key, value) VALUES (?,?,?)",
                         (conversation.id(), key, value))

    # -- adapter-owned state ---------------------------------------------------------------------------------------

    def adapter_value(self, namespace: str, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM adapter_state WHERE namespace = ? AND key = ?",
                               (namespace, key)).fetchone()
        return str(row[0]) if row else None

    def set_adapter_value(self, namespace: str, key: str, value: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO adapter_state (namespace, key, value) VALUES (?,?,?)",
                         (namespace, key, value))

    def history(self, conversation: ConversationKey) -> list[dict[str, Any]]:
        rows = self._db.execute("SELECT message FROM history WHERE conversation = ? ORDER BY id",
                                (conversation.id(),))
        return [json.loads(r[0]) for r in rows]

    def append_history(self, conversation: ConversationKey, messages: Sequence[Mapping[str, Any]]) -> None:
        with self._tx() as db:
            db.executemany("INSERT INTO history (conversation, message) VALUES (?, ?)",
                           [(conversation.id(), json.dumps(dict(m))) for m in messages])

    def clear_history(self, conversation: ConversationKey) -> None:
        self._db.execute("DELETE FROM history WHERE conversation = ?", (conversation.id(),))


def _dump_actor(actor: Actor | None) -> str | None:
    return json.dumps([actor.platform, actor.user_id, actor.display_name]) if actor else None


def _load_actor(text: str | None) -> Actor | None:
    if not text:
        return None
    platform, user_id, name = json.loads(text)
    return Actor(platform, user_id, name)


def _dump_outcome(outcome: Outcome) -> str:
    return json.dumps({"status": outcome.status.value, "content": dict(outcome.content) if outcome.content else None,
                       "by": _dump_actor(outcome.by), "reason": outcome.reason})


def _load_outcome(text: str | None) -> Outcome | None:
    if not text:
        return None
    data = json.loads(text)
    return Outcome(Status(data["status"]), data["content"], _load_actor(data["by"]), data["reason"])


def _dump_interaction(i: Interaction) -> str:
    return json.dumps({
        "id": i.id, "kind": i.kind.value, "server": [i.server.name, i.server.title],
        "conversation": i.conversation.id(), "requester": _dump_actor(i.requester), "approvers": sorted(i.approvers),
        "message": i.message, "schema": dict(i.form.schema), "expires_at": i.expires_at,
        "details": [[d.label, d.text, d.full_length] for d in i.details], "url": i.url,
        "accept_label": i.accept_label, "decline_label": i.decline_label, "quick_accept": i.quick_accept,
        "tool": i.tool,
    })


def _load_interaction(text: str) -> Interaction:
    d = json.loads(text)
    form = form_from_schema(d["schema"]) if d["schema"] else Form()
    return Interaction(
        id=d["id"], kind=Kind(d["kind"]), server=ServerLabel(*d["server"]),
        conversation=ConversationKey.from_id(d["conversation"]), requester=_load_actor(d["requester"]),
        approvers=frozenset(d["approvers"]), message=d["message"], form=form, expires_at=d["expires_at"],
        details=tuple(Detail(*x) for x in d["details"]), url=d["url"], accept_label=d["accept_label"],
        decline_label=d["decline_label"], quick_accept=d["quick_accept"], tool=d["tool"],
    )


def _stored(row: Any) -> StoredInteraction:
    body, status, card, pending_call, input_key, outcome, interaction_id = row
    return StoredInteraction(
        interaction=_load_interaction(body), status=Status(status),
        card=CardRef(interaction_id, json.loads(card)) if card else None,
        pending_call=pending_call, input_key=input_key, outcome=_load_outcome(outcome),
    )
