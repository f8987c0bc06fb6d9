"""The SQLite schema of `bridge.store`: every table and index, created if missing when a store opens."""

SCHEMA = """
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
