"""`mcp-chat-bridge audit`: the audit log as a table, JSON lines or CSV, filtered; `--verify` checks each of its keyed
hash chains and their signed checkpoints (`bridge.storage.audit`).

The store, SQLite file or Postgres database, is opened read-only, so the log can be read while the bridge runs
(SQLite in WAL mode lets readers in beside the writer; Postgres transactions are read-only) and reading can never
change it. Its address is shown without credentials (`bridge.safety.addresses`). Names and details in the log may come
from servers and chat users: control characters are removed before anything reaches a terminal, and CSV cells that
a spreadsheet would run as a formula are quoted.
"""

from __future__ import annotations

import csv
import json
import sqlite3
import time
import unicodedata
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from bridge.config.file import parse_duration
from bridge.door.model import Kind, shown_conversation
from bridge.errors import ConfigError, StoreError
from bridge.safety.addresses import shown
from bridge.storage import audit as chain
from bridge.storage import is_postgres
from bridge.storage.audit_keys import PUBLIC_KEY_ENV, SIGNING_KEY_ENV, public_text, signed_by
from bridge.storage.checkpoints import stored


@dataclass(frozen=True, slots=True)
class Filters:
    since: float | None = None
    server: str | None = None
    kind: str | None = None
    who: str | None = None


@dataclass(frozen=True, slots=True)
class Entry:
    id: int
    time: str
    server: str
    kind: str
    outcome: str
    by: str | None
    by_name: str | None
    requester: str | None
    conversation: str
    interaction: str
    detail: str


def since(text: str, now: float | None = None) -> float:
    """`--since`: a duration back from now (`1d`, `90m`) or a date or time (`2026-11-01`, `2026-11-01T09:30`)."""
    try:
        return (time.time() if now is None else now) - parse_duration(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise ConfigError([f"--since: {text!r} is neither a duration (1d, 12h) nor a date (2026-11-01)"]) from None


def kind(text: str) -> str:
    kinds = [k.value for k in Kind]
    if text not in kinds:
        raise ConfigError([f"--kind: must be one of {', '.join(kinds)}"])
    return text


class Log:
    """The store opened for reading its audit log: a SQLite file read-only, or a Postgres database through the
    driver `run` uses, in read-only transactions. Open with `opened`."""

    def __init__(self, fetch: Callable[[str, Sequence[Any]], Awaitable[list[tuple[Any, ...]]]],
                 columns: set[str], checkpoints: bool) -> None:
        self._fetch = fetch
        self.columns = columns
        self.has_checkpoints = checkpoints
        self.chained = "chain" in columns
        """Whether the log has several chains (schema step 12; chain 0 alone before)."""

    async def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return await self._fetch(sql, params)


@asynccontextmanager
async def opened(target: str) -> AsyncIterator[Log]:
    """The audit log of the store at `target` (a SQLite file or a `postgresql://` URL), never written to."""
    if is_postgres(target):
        async with _postgres(target) as log:
            yield log
        return
    db = _sqlite(target)
    try:
        async def fetch(sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
            try:
                return db.execute(sql, tuple(params)).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"store: cannot read {shown(target)}: {exc}") from None

        tables = {r[0] for r in await fetch("SELECT name FROM sqlite_master WHERE type = 'table'")}
        columns = {r[1] for r in await fetch("PRAGMA table_info(audit)")}
        yield _checked(target, Log(fetch, columns, "audit_checkpoints" in tables))
    finally:
        db.close()


def _sqlite(path: str) -> sqlite3.Connection:
    if path == ":memory:" or not Path(path).is_file():
        raise ConfigError([f"store: {shown(path)} does not exist (is it the store the bridge uses? see `store:` in "
                           "the config, or pass --store)"])
    try:
        return sqlite3.connect(f"file:{quote(str(Path(path).resolve()))}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise ConfigError([f"store: cannot read {shown(path)}: {exc}"]) from None


@asynccontextmanager
async def _postgres(url: str) -> AsyncIterator[Log]:
    # Imported here: psycopg is an optional extra.
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from bridge.storage.postgres import PostgresDriver

    try:
        options = str(conninfo_to_dict(url).get("options") or "")
        readonly = make_conninfo(url, options=f"{options} -c default_transaction_read_only=on".strip())
    except Exception:  # noqa: BLE001 - psycopg's own parse error quotes the URL, password and all
        raise ConfigError([f"store: {shown(url)} is not a Postgres URL psycopg can read"]) from None
    driver = await PostgresDriver.open(readonly, min_size=1, max_size=1)
    try:
        async def fetch(sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
            return await driver.fetch(sql, params)

        tables = {r[0] for r in await fetch("SELECT table_name FROM information_schema.tables"
                                            " WHERE table_schema = current_schema()")}
        columns = {r[0] for r in await fetch("SELECT column_name FROM information_schema.columns"
                                             " WHERE table_schema = current_schema() AND table_name = 'audit'")}
        yield _checked(url, Log(fetch, columns, "audit_checkpoints" in tables))
    finally:
        await driver.aclose()


def _checked(target: str, log: Log) -> Log:
    if not log.columns:
        raise ConfigError([f"store: {shown(target)} has no audit log (is it a bridge store?)"])
    if "hash" not in log.columns:
        raise ConfigError([f"store: {shown(target)} was written before the audit chain existed; start the bridge "
                           "once with it to link its rows"])
    return log


async def entries(log: Log, filters: Filters) -> list[Entry]:
    where: list[str] = []
    args: list[Any] = []
    if filters.since is not None:
        where.append("at >= ?")
        args.append(filters.since)
    for column, value in (("server", filters.server), ("kind", filters.kind)):
        if value is not None:
            where.append(f"{column} = ?")
            args.append(value)
    if filters.who is not None:
        where.append("(lower(actor) LIKE ? OR lower(actor_name) LIKE ? OR lower(requester) LIKE ?)")
        args.extend([f"%{filters.who.lower()}%"] * 3)
    query = ("SELECT id, at, server, kind, outcome, actor, actor_name, requester, conversation, interaction_id, detail"
             " FROM audit" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id")
    return [Entry(r[0], _when(r[1]), *r[2:]) for r in await log.fetch(query, args)]


@dataclass(frozen=True, slots=True)
class Checkpoints:
    """The checkpoints `--verify` trusts (their signatures checked), and what it could not use."""

    trusted: list[chain.Checkpoint]
    problems: list[str]
    """Checkpoints whose signature fails: each one makes the verdict a failure."""
    notes: list[str]


def read_checkpoints(files: Sequence[Path]) -> tuple[list[tuple[str, chain.Checkpoint]], list[str]]:
    """The checkpoints of files shipped away (one JSON object a line), and the lines that are not checkpoints."""
    found: list[tuple[str, chain.Checkpoint]] = []
    problems: list[str] = []
    for file in files:
        try:
            lines = file.read_text("utf-8").splitlines()
        except OSError as exc:
            raise ConfigError([f"{file}: cannot read the checkpoints: {exc.strerror}"]) from None
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                found.append((str(file), chain.Checkpoint.from_record(json.loads(line))))
            except (ValueError, AttributeError, TypeError):
                problems.append(f"{file}, line {number}: not a checkpoint")
    return found, problems


async def checkpoints(log: Log, shipped: Sequence[tuple[str, chain.Checkpoint]],
                      key: Ed25519PublicKey | None) -> Checkpoints:
    """The store's checkpoints and those `shipped` away, checked with `key`."""
    found = [("the store", c) for c in await stored(log, chained=log.chained)] if log.has_checkpoints else []
    unique = {(c.chain, c.rows, c.row_id, c.head, c.at, c.signature): (where, c) for where, c in [*found, *shipped]}
    if unique and key is None:
        return Checkpoints([], [], [f"{len(unique)} checkpoints not checked: no public key ({PUBLIC_KEY_ENV}, "
                                    f"--public-key, or {SIGNING_KEY_ENV} to derive it)"])
    trusted, problems = [], []
    for where, checkpoint in unique.values():
        if key is not None and signed_by(key, checkpoint):
            trusted.append(checkpoint)
        else:
            problems.append(f"a checkpoint in {where} (of {checkpoint.when}, chain {checkpoint.chain}, "
                            f"{checkpoint.rows} rows) is not signed by the audit signing key: forged or from another "
                            "bridge")
    return Checkpoints(trusted, problems, [])


async def verify(log: Log, ring: Mapping[str, bytes] | None = None,
                 trusted: Sequence[chain.Checkpoint] = ()) -> dict[int, chain.Verdict]:
    """Each chain's verdict (a store from before step 12 is chain 0 alone)."""
    key_id = "key_id" if "key_id" in log.columns else "NULL"
    number, order = ("chain", "chain, id") if log.chained else ("0", "id")
    rows = await log.fetch(f"SELECT {number}, id, {', '.join(chain.FIELDS)}, hash, {key_id} FROM audit"
                           f" ORDER BY {order}", ())
    return chain.verify_chains(((int(r[0]), (r[1], r[2:-2], r[-2], r[-1])) for r in rows), ring, trusted)


def verdict_text(verdicts: Mapping[int, chain.Verdict]) -> list[str]:
    """What `--verify` says: the verdict first, then what it vouches for against whom; with several chains, a line
    for each chain (a broken one's says where and why), then what holds for all of them."""
    if set(verdicts) <= {0}:
        return _chain_text(verdicts.get(0) or chain.Verdict(0, chain.GENESIS, None))
    broken = [n for n, v in verdicts.items() if v.broken is not None]
    total = sum(v.rows for v in verdicts.values())
    lines = [f"BROKEN: {len(broken)} of {len(verdicts)} chains" if broken else
             f"OK: {total} rows in {len(verdicts)} chains, each unbroken"]
    for n, v in verdicts.items():
        if v.broken is not None:
            lines.append(f"chain {n}: {_chain_text(v)[0]}")
            continue
        covered = f"signed checkpoints cover rows 1-{v.checkpointed}" if v.checkpointed else "no signed checkpoint"
        lines.append(f"chain {n}: {v.rows} rows, head {v.head}, {v.keyed} keyed, {covered}")
    intact = [v for v in verdicts.values() if v.broken is None]
    keyed = sum(v.keyed for v in intact)
    key_ids = sorted({k for v in intact for k in v.key_ids})
    if keyed:
        lines.append(f"keyed: {keyed} rows hashed with audit key {', '.join(key_ids)} (and the rows before them in "
                     "their chain through their hashes): nobody without the key can have rewritten them unseen")
    elif total:
        lines.append(f"warning: no row is keyed ({chain.KEY_ENV} was not set when they were written): the chains "
                     "prove nothing against someone who can write the store")
    checkpoints = sum(v.checkpoints for v in verdicts.values())
    if checkpoints:
        lines.append(f"checkpoints: {checkpoints} signed")
    open_tails = [n for n, v in verdicts.items() if v.broken is None and v.rows > v.checkpointed]
    if open_tails:
        lines.append(f"not covered by a signed checkpoint: the rows after the newest checkpoint of chains "
                     f"{', '.join(map(str, open_tails))} (a holder of the HMAC key, or a rollback to a copy, could "
                     "have changed them unseen)" if keyed else
                     f"NOT VOUCHED FOR: the rows after the newest checkpoint of chains "
                     f"{', '.join(map(str, open_tails))}: nothing shows a rewrite by someone who can write the store")
    return lines


def _chain_text(verdict: chain.Verdict) -> list[str]:
    """What `--verify` says of one chain."""
    if verdict.broken is not None:
        b = verdict.broken
        return [f"BROKEN at row {b.position} (id {b.row_id}): {b.reason}; the {verdict.rows} rows before it are intact "
                f"(last good hash {verdict.head})"]
    lines = [f"OK: {verdict.rows} rows, the chain is unbroken; head {verdict.head}"]
    unvouched = verdict.checkpointed + 1
    if verdict.keyed:
        lines.append(f"keyed: {verdict.keyed} rows hashed with audit key {', '.join(verdict.key_ids)} (and the rows "
                     "before them through their hashes): nobody without the key can have rewritten them unseen")
    elif verdict.rows:
        lines.append(f"warning: no row is keyed ({chain.KEY_ENV} was not set when they were written): the chain "
                     "proves nothing against someone who can write the store")
    if verdict.checkpoints:
        lines.append(f"checkpoints: {verdict.checkpoints} signed, the newest covering rows 1-{verdict.checkpointed}")
    if verdict.rows >= unvouched:
        lines.append(f"not covered by a signed checkpoint: from row {unvouched} on (a holder of the HMAC key, or a "
                     "rollback to a copy, could have changed them unseen)" if verdict.keyed else
                     f"NOT VOUCHED FOR: from row {unvouched} on nothing shows a rewrite by someone who can write the "
                     "store")
    return lines


def write_table(items: Sequence[Entry], out: TextIO) -> None:
    headers = ("time", "server", "kind", "outcome", "decided by", "asked by", "conversation", "detail")
    rows = [tuple(_clean(str(c)) for c in (e.time, e.server, e.kind, e.outcome, e.by_name or e.by or "-",
                                           e.requester or "-", shown_conversation(e.conversation),
                                           _short(e.detail, 60)))
            for e in items]
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    for row in (headers, *rows):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip(), file=out)


def write_json(items: Sequence[Entry], out: TextIO) -> None:
    for item in items:
        print(json.dumps(asdict(item), ensure_ascii=False), file=out)


def write_csv(items: Sequence[Entry], out: TextIO) -> None:
    writer = csv.writer(out)
    writer.writerow([f for f in Entry.__slots__])
    for item in items:
        writer.writerow([_cell(v) for v in asdict(item).values()])


def _when(at: float) -> str:
    return datetime.fromtimestamp(at).astimezone().isoformat(timespec="seconds")


def _clean(text: str) -> str:
    return "".join(ch if unicodedata.category(ch) not in ("Cc", "Cf") else " " for ch in text)


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cell(value: Any) -> Any:
    # A spreadsheet runs a cell that starts with one of these as a formula (CSV injection).
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


@dataclass(frozen=True, slots=True)
class Verifying:
    """What `--verify` checks with, read before the store is opened (a bad key is a usage error)."""

    ring: Mapping[str, bytes]
    key: Ed25519PublicKey | None
    shipped: list[tuple[str, chain.Checkpoint]]
    notes: list[str]
    """Lines of shipped files that are not checkpoints, a configured file that is not here."""


async def verify_all(log: Log, given: Verifying) -> tuple[bool, list[str]]:
    """`--verify`: keys, chain and checkpoints; whether all hold, and what to say."""
    found = await checkpoints(log, given.shipped, given.key)
    verdicts = await verify(log, given.ring, found.trusted)
    lines = verdict_text(verdicts) + [f"BROKEN: {p}" for p in found.problems]
    lines += [f"note: {n}" for n in [*found.notes, *given.notes]]
    if given.key is not None and found.trusted:
        lines.append(f"checkpoint signing key: {public_text(given.key)}")
    # With a key at hand, rows that only an unkeyed hash and no checkpoint vouch for are no longer "fine": they are
    # exactly what someone without the key would write after rewriting the whole log.
    intact = all(v.broken is None for v in verdicts.values())
    unvouched = [n for n, v in verdicts.items() if not v.keyed and v.checkpointed < v.rows]
    if given.ring and intact and unvouched:
        where = "" if set(verdicts) <= {0} else f" in chains {', '.join(map(str, unvouched))}"
        lines.append(f"NOT VOUCHED FOR: {chain.KEY_ENV} is set, but no row{where} is keyed: written before the key "
                     "was set, or rewritten whole by someone without it")
    return intact and not found.problems and not (given.ring and unvouched), lines
