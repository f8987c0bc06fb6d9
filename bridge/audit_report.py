"""`mcp-chat-bridge audit`: the audit log as a table, JSON lines or CSV, filtered; `--verify` checks its hash chain.

The store is opened read-only, so the log can be read while the bridge runs (SQLite in WAL mode lets readers in
beside the writer) and reading can never change it. Names and details in the log may come from servers and chat
users: control characters are removed before anything reaches a terminal, and CSV cells that a spreadsheet would
run as a formula are quoted.
"""

from __future__ import annotations

import csv
import json
import sqlite3
import time
import unicodedata
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

from bridge import audit as chain
from bridge.config import parse_duration
from bridge.errors import ConfigError
from bridge.model import Kind


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


def connect(path: str) -> sqlite3.Connection:
    if path == ":memory:" or not Path(path).is_file():
        raise ConfigError([f"store: {path} does not exist (is it the store the bridge uses? see `store:` in the "
                           "config, or pass --store)"])
    try:
        db = sqlite3.connect(f"file:{quote(str(Path(path).resolve()))}?mode=ro", uri=True)
        columns = {row[1] for row in db.execute("PRAGMA table_info(audit)")}
    except sqlite3.Error as exc:
        raise ConfigError([f"store: cannot read {path}: {exc}"]) from None
    if not columns:
        raise ConfigError([f"store: {path} has no audit log (is it a bridge store?)"])
    if "hash" not in columns:
        raise ConfigError([f"store: {path} was written before the audit chain existed; start the bridge once with "
                           "it to link its rows"])
    return db


def entries(db: sqlite3.Connection, filters: Filters) -> list[Entry]:
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
    return [Entry(r[0], _when(r[1]), *r[2:]) for r in db.execute(query, args)]


def verify(db: sqlite3.Connection) -> chain.Verdict:
    rows = db.execute(f"SELECT id, {', '.join(chain.FIELDS)}, hash FROM audit ORDER BY id")
    return chain.verify((row[0], row[1:-1], row[-1]) for row in rows)


def verdict_text(verdict: chain.Verdict) -> str:
    if verdict.broken is None:
        return f"OK: {verdict.rows} rows, the chain is unbroken; head {verdict.head}"
    b = verdict.broken
    return (f"BROKEN at row {b.position} (id {b.row_id}): {b.reason}; the {b.position - 1} rows before it are intact "
            f"(last good hash {verdict.head})")


def write_table(items: Sequence[Entry], out: TextIO) -> None:
    headers = ("time", "server", "kind", "outcome", "decided by", "asked by", "conversation", "detail")
    rows = [tuple(_clean(str(c)) for c in (e.time, e.server, e.kind, e.outcome, e.by_name or e.by or "-",
                                           e.requester or "-", e.conversation, _short(e.detail, 60)))
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
