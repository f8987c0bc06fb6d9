"""The store's schema, as numbered steps run at start (both engines), so an upgrade needs no manual step.

Each step runs in one transaction together with its row in `schema_version`, so a step is applied entirely or not at
all, and exactly once even when several Postgres workers start at the same moment (an advisory lock serialises them;
one that loses the race finds the step done and moves on). Steps only add: no step drops a table or a column that
holds rows. Version N means the same logical schema on both engines. Never edit a released step; add one.

Step 1 is the schema of the synchronous `bridge.store` as it shipped (`CREATE … IF NOT EXISTS`), so a file it wrote
is adopted in place with every row.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bridge.errors import StoreError, StoreSchemaError
from bridge.storage import audit as chain
from bridge.storage.driver import Dialect, Driver, Step

logger = logging.getLogger(__name__)

MIGRATE_LOCK = 0x6D63_7062_7269_6401  # pg advisory lock key: "mcpbrid" + 1


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    what: str
    sqlite: tuple[str, ...]
    postgres: tuple[str, ...]
    data: Callable[[Driver], Awaitable[list[Step]]] | None = None
    """Steps made from the rows as they are, run after the statements in the same transaction."""

    def statements(self, dialect: Dialect) -> tuple[str, ...]:
        return self.sqlite if dialect == "sqlite" else self.postgres


def _v1(real: str, serial: str, roots_pos: str) -> tuple[str, ...]:
    return (
        f"""CREATE TABLE IF NOT EXISTS audit (
            id {serial}, at {real} NOT NULL, interaction_id TEXT NOT NULL, kind TEXT NOT NULL, server TEXT NOT NULL,
            conversation TEXT NOT NULL, outcome TEXT NOT NULL, actor TEXT, actor_name TEXT, requester TEXT,
            detail TEXT NOT NULL DEFAULT '')""",
        f"""CREATE TABLE IF NOT EXISTS interactions (
            id TEXT PRIMARY KEY, conversation TEXT NOT NULL, status TEXT NOT NULL, body TEXT NOT NULL, card TEXT,
            pending_call TEXT, input_key TEXT, outcome TEXT, created_at {real} NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS interactions_open ON interactions (status)",
        f"""CREATE TABLE IF NOT EXISTS pending_calls (
            id TEXT PRIMARY KEY, conversation TEXT NOT NULL, server TEXT NOT NULL, tool TEXT NOT NULL,
            arguments TEXT NOT NULL, request_state TEXT, input_requests TEXT NOT NULL, requester TEXT,
            created_at {real} NOT NULL)""",
        f"""CREATE TABLE IF NOT EXISTS roots (
            conversation TEXT NOT NULL, uri TEXT NOT NULL, name TEXT NOT NULL DEFAULT '',{roots_pos}
            PRIMARY KEY (conversation, uri))""",
        """CREATE TABLE IF NOT EXISTS settings (
            conversation TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (conversation, key))""",
        """CREATE TABLE IF NOT EXISTS adapter_state (
            namespace TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, PRIMARY KEY (namespace, key))""",
        f"""CREATE TABLE IF NOT EXISTS history (
            id {serial}, conversation TEXT NOT NULL, message TEXT NOT NULL)""",
    )


def _v2(real: str, expires_from_body: str) -> tuple[str, ...]:
    return (
        # Stored deadlines and owners: any worker can expire a card, a survivor takes a dead worker's work.
        f"ALTER TABLE interactions ADD COLUMN expires_at {real}",
        "ALTER TABLE interactions ADD COLUMN worker TEXT",
        "ALTER TABLE interactions ADD COLUMN expiry_worker TEXT",
        f"ALTER TABLE interactions ADD COLUMN expiry_until {real}",
        f"UPDATE interactions SET expires_at = {expires_from_body} WHERE status = 'open'",
        "ALTER TABLE pending_calls ADD COLUMN worker TEXT",
        f"""CREATE TABLE workers (
            id TEXT PRIMARY KEY, started_at {real} NOT NULL, heartbeat_at {real} NOT NULL,
            lease_until {real} NOT NULL)""",
        # What a restart reads: open interactions in order, and each stored call's interactions (without this
        # one, 1 000 pending calls next to 100 000 old rows meant 1 000 full scans).
        "DROP INDEX IF EXISTS interactions_open",
        "CREATE INDEX interactions_status_created ON interactions (status, created_at)",
        # IF NOT EXISTS: the synchronous store made this one itself once it restored calls row by row.
        "CREATE INDEX IF NOT EXISTS interactions_call ON interactions (pending_call, created_at)",
        "CREATE INDEX interactions_deadline ON interactions (expires_at) WHERE status = 'open'",
        # IF NOT EXISTS too: the synchronous store made it as well (a restart reads each parked card's approvals).
        "CREATE INDEX IF NOT EXISTS audit_interaction ON audit (interaction_id)",
    )


def _v3(real: str, serial_pos: str, blob: str) -> tuple[str, ...]:
    return (
        # The audit hash chain (`bridge.storage.audit`); rows from before it are linked by `link_unchained`, in this
        # step only.
        "ALTER TABLE audit ADD COLUMN IF NOT EXISTS hash TEXT",
        # Team approvals: grants ("allow this again") and the LLM token budgets' daily usage.
        f"""CREATE TABLE IF NOT EXISTS grants (
            id TEXT PRIMARY KEY, place TEXT NOT NULL, expires_at {real}, revoked TEXT,
            body TEXT NOT NULL{serial_pos})""",
        "CREATE INDEX IF NOT EXISTS grants_place ON grants (place)",
        """CREATE TABLE IF NOT EXISTS usage (
            day TEXT NOT NULL, subject TEXT NOT NULL, tokens BIGINT NOT NULL, PRIMARY KEY (day, subject))""",
        # Encrypted OAuth tokens, where every worker sees them (`bridge.auth.store_vault`).
        f"""CREATE TABLE IF NOT EXISTS oauth_tokens (
            server TEXT NOT NULL, identity TEXT NOT NULL, kind TEXT NOT NULL, blob {blob} NOT NULL,
            updated {real} NOT NULL, PRIMARY KEY (server, identity, kind))""",
    )


def _v4(real: str) -> tuple[str, ...]:
    return (
        # Calls running (any era), so that after a crash their conversations are told; each owned by its worker.
        f"""CREATE TABLE IF NOT EXISTS running_calls (
            id TEXT PRIMARY KEY, conversation TEXT NOT NULL, server TEXT NOT NULL, tool TEXT NOT NULL,
            started_at {real} NOT NULL)""",
        "ALTER TABLE running_calls ADD COLUMN IF NOT EXISTS worker TEXT",
    )


def _v5() -> tuple[str, ...]:
    return (
        # Parked cards (no task waits on them): whoever claims the last open card of a parked call's round continues
        # the call, on any worker.
        "ALTER TABLE interactions ADD COLUMN parked INTEGER NOT NULL DEFAULT 0",
    )


def _v6(real: str) -> tuple[str, ...]:
    return (
        # Sign-ins in flight (per-person OAuth), so that the redirect may land on any worker: the worker that started
        # one keeps its PKCE verifier in memory and does the exchange; another worker hands it the code through this
        # row. Keyed by a hash of the `state`, never the state itself; no verifier, and the code only until it ends.
        f"""CREATE TABLE IF NOT EXISTS signins (
            state_hash TEXT PRIMARY KEY, server TEXT NOT NULL, person TEXT NOT NULL, worker TEXT NOT NULL,
            status TEXT NOT NULL, expires_at {real} NOT NULL, code TEXT, iss TEXT, error TEXT,
            created_at {real} NOT NULL)""",
    )


def _v8(real: str, key: str) -> tuple[str, ...]:
    return (
        # The key that hashed each audit row (NULL: plain SHA-256), and signed checkpoints of the chain's head.
        "ALTER TABLE audit ADD COLUMN IF NOT EXISTS key_id TEXT",
        f"""CREATE TABLE IF NOT EXISTS audit_checkpoints (
            id {key}, at {real} NOT NULL, rows BIGINT NOT NULL, row_id BIGINT NOT NULL, head TEXT NOT NULL,
            signature TEXT NOT NULL)""",
    )


def _v7(real: str, key: str) -> tuple[str, ...]:
    return (
        # Decisions forwarded to the worker holding a legacy card (several workers on Postgres): kept until that worker
        # takes them, so one sent while it was not listening (reconnecting, say) is not lost; the NOTIFY only wakes it.
        f"""CREATE TABLE IF NOT EXISTS forwards (
            id {key}, interaction_id TEXT NOT NULL, message TEXT NOT NULL, at {real} NOT NULL)""",
        "CREATE INDEX IF NOT EXISTS forwards_interaction ON forwards (interaction_id)",
    )


async def link_unchained(driver: Driver) -> list[Step]:
    """The links of audit rows written before the hash chain existed, oldest first: only in the step that brought the
    chain. Never later: a row without a hash is then one whose hash was removed, and linking it would hide that."""
    columns = await _columns(driver, "audit")
    chained = "hash" in columns  # the synchronous store added and filled it itself
    rows = await driver.fetch(f"SELECT id, {', '.join(chain.FIELDS)} FROM audit"
                              f"{' WHERE hash IS NULL' if chained else ''} ORDER BY id")
    if not rows:
        return []
    before = await driver.fetch("SELECT hash FROM audit WHERE id < ? ORDER BY id DESC LIMIT 1",
                                (rows[0][0],)) if chained else []
    previous: str | None = before[0][0] if before else None
    steps = []
    for row in rows:
        previous = chain.link(previous, row[1:])
        steps.append(Step("UPDATE audit SET hash = ? WHERE id = ? AND hash IS NULL", (previous, row[0])))
    logger.info("linking %d audit rows from before the hash chain", len(rows))
    return steps


async def _columns(driver: Driver, table: str) -> set[str]:
    if driver.dialect == "sqlite":
        return {r[1] for r in await driver.fetch(f"PRAGMA table_info({table})")}
    return {r[0] for r in await driver.fetch("SELECT column_name FROM information_schema.columns"
                                             " WHERE table_schema = current_schema() AND table_name = ?", (table,))}


def _v9(real: str) -> tuple[str, ...]:
    return (
        # Who sent a stored 2026 round to its server (a process, not just a worker id: a worker restarted under the
        # same id is another process). Set by one conditional update, synced before the round is sent: exactly one
        # worker continues a round, and a round that may have reached the server is known as such after a crash.
        "ALTER TABLE pending_calls ADD COLUMN sent_by TEXT",
        f"ALTER TABLE pending_calls ADD COLUMN sent_at {real}",
        # Who decided a card, and whether its final state was shown since: a worker that dies between the two
        # leaves the card to whoever takes its work over (the rows before this step were shown, as far as known).
        "ALTER TABLE interactions ADD COLUMN decided_by TEXT",
        "ALTER TABLE interactions ADD COLUMN shown INTEGER NOT NULL DEFAULT 1",
        "CREATE INDEX interactions_unshown ON interactions (decided_by) WHERE shown = 0",
    )


def _v10() -> tuple[str, ...]:
    return (
        # What approved a stored call (a tool card's interaction id, or a grant's id): a call continued after a
        # restart re-issues the approval's receipt from it, so its `tools/call` still carries one.
        "ALTER TABLE pending_calls ADD COLUMN approval TEXT",
    )


def _v11(real: str) -> tuple[str, ...]:
    return (
        # Tasks the bridge runs for a server (an elicitation or sampling request sent as a task): any worker answers
        # the server's tasks/get from the row (`bridge.storage.served_tasks`).
        f"""CREATE TABLE IF NOT EXISTS served_tasks (
            id TEXT PRIMARY KEY, server TEXT NOT NULL, kind TEXT NOT NULL, conversation TEXT NOT NULL,
            status TEXT NOT NULL, status_message TEXT NOT NULL DEFAULT '', interaction_id TEXT, result TEXT,
            error TEXT, created_at {real} NOT NULL, updated_at {real} NOT NULL, ttl_ms BIGINT NOT NULL,
            expires_at {real} NOT NULL, worker TEXT)""",
        "CREATE INDEX IF NOT EXISTS served_tasks_server ON served_tasks (server, status)",
    )


def _v12(shared: bool) -> tuple[str, ...]:
    return (
        # Several audit chains side by side (`bridge.storage.audit`), so appends to different chains never wait for
        # each other. The rows and checkpoints there are are chain 0's, which goes on as it was.
        "ALTER TABLE audit ADD COLUMN chain INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE audit_checkpoints ADD COLUMN chain INTEGER NOT NULL DEFAULT 0",
        # Each append reads its chain's newest row.
        "CREATE INDEX audit_chain ON audit (chain, id)",
        # A worker of an earlier version still running beside migrated ones (Postgres) would append to chain 0 after
        # the newest row of any chain, and sign that as chain 0's head: without a default its writes fail instead of
        # breaking the chain. (SQLite has one process, and no DROP DEFAULT.)
        *(("ALTER TABLE audit ALTER COLUMN chain DROP DEFAULT",
           "ALTER TABLE audit_checkpoints ALTER COLUMN chain DROP DEFAULT") if shared else ()),
    )


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "the first schema (bridge.store)",
              _v1("REAL", "INTEGER PRIMARY KEY AUTOINCREMENT", ""),
              _v1("DOUBLE PRECISION", "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
                  " pos BIGINT GENERATED ALWAYS AS IDENTITY,")),
    Migration(2, "deadlines, owners, workers, restart indexes",
              _v2("REAL", "json_extract(body, '$.expires_at')"),
              _v2("DOUBLE PRECISION", "(body::json->>'expires_at')::double precision")),
    Migration(3, "audit hash chain, grants, token usage, OAuth tokens",
              _v3("REAL", "", "BLOB"),
              _v3("DOUBLE PRECISION", ", pos BIGINT GENERATED ALWAYS AS IDENTITY", "BYTEA"),
              data=link_unchained),
    Migration(4, "running calls", _v4("REAL"), _v4("DOUBLE PRECISION")),
    Migration(5, "parked cards", _v5(), _v5()),
    Migration(6, "sign-ins in flight", _v6("REAL"), _v6("DOUBLE PRECISION")),
    Migration(7, "forwarded decisions", _v7("REAL", "INTEGER PRIMARY KEY AUTOINCREMENT"),
              _v7("DOUBLE PRECISION", "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY")),
    Migration(8, "audit keys and checkpoints", _v8("REAL", "INTEGER PRIMARY KEY AUTOINCREMENT"),
              _v8("DOUBLE PRECISION", "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY")),
    Migration(9, "sent rounds, cards shown final", _v9("REAL"), _v9("DOUBLE PRECISION")),
    Migration(10, "the approval of a stored call", _v10(), _v10()),
    Migration(11, "tasks served to servers", _v11("REAL"), _v11("DOUBLE PRECISION")),
    Migration(12, "several audit chains", _v12(shared=False), _v12(shared=True)),
)
LATEST = MIGRATIONS[-1].version


async def current_version(driver: Driver) -> int:
    rows = await driver.fetch("SELECT max(version) FROM schema_version")
    return int(rows[0][0] or 0)


def _lock(driver: Driver) -> list[Step]:
    return [Step("SELECT pg_advisory_xact_lock(?)", (MIGRATE_LOCK,))] if driver.dialect == "postgres" else []


async def migrate(driver: Driver, migrations: tuple[Migration, ...] = MIGRATIONS) -> int:
    """Bring the schema up to the newest step; the version it is at afterwards."""
    await driver.transaction([*_lock(driver), Step(
        "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at DOUBLE PRECISION"
        " NOT NULL)")])
    version = await current_version(driver)
    newest = migrations[-1].version
    if version > newest:
        raise StoreSchemaError(f"the store is at schema version {version}, newer than this mcp-chat-bridge knows "
                               f"({newest}): upgrade the bridge, or point it at another store")
    for step in migrations:
        if step.version <= version:
            continue
        steps = [*_lock(driver), Step("INSERT INTO schema_version (version, applied_at) VALUES (?, ?)",
                                      (step.version, time.time()))]
        steps += [Step(sql) for sql in await _portable(driver, step.statements(driver.dialect))]
        if step.data is not None:
            steps += await step.data(driver)
        try:
            await driver.transaction(steps)
        except StoreError as exc:
            # Another worker may have applied it while we waited for the lock: then its version row is there.
            if await current_version(driver) >= step.version:
                continue
            raise StoreSchemaError(f"schema migration {step.version} ({step.what}) failed: {exc}") from exc
        logger.info("store schema migrated to version %d (%s)", step.version, step.what)
        version = step.version
    return version


_ADD_COLUMN = re.compile(r"ALTER TABLE (\w+) ADD COLUMN IF NOT EXISTS (\w+) (.+)", re.S)


async def _portable(driver: Driver, statements: tuple[str, ...]) -> list[str]:
    """SQLite has no `ADD COLUMN IF NOT EXISTS` (a column the synchronous store already added, say): such a
    statement is dropped there when the column exists, and run without the clause when it does not."""
    if driver.dialect == "postgres":
        return list(statements)
    out = []
    for sql in statements:
        match = _ADD_COLUMN.fullmatch(sql)
        if match:
            table, column, kind = match.groups()
            if column in await _columns(driver, table):
                continue
            sql = f"ALTER TABLE {table} ADD COLUMN {column} {kind}"
        out.append(sql)
    return out
