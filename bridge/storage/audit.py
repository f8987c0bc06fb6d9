"""The audit log's hash chain: each row carries a keyed hash (HMAC-SHA256) of its own fields and of the row before it.

Changing any field of a stored row, removing a row or putting one in between breaks the chain from that row on, and
`verify` names the first row it cannot vouch for. Whoever lacks the key cannot recompute the hashes after an edit; a
row records the id of the key that hashed it (`key_id`), so keys can be rotated. A row without a key id was hashed
with plain SHA-256 (no key configured, or written before keys existed): anyone who can write the store can recompute
those, so they are vouched for only by a keyed row after them (its hash covers theirs) or by a checkpoint.

Signed checkpoints (`Checkpoint`, Ed25519) name the head at a row and the number of rows up to it; kept away from the
store, they catch what a keyed chain cannot: rows removed from the end, a store rolled back to a copy, and any rewrite
by someone who holds the HMAC key but not the signing key. Pure functions; the store calls `link` when it appends a
row, and `mcp-chat-bridge audit --verify` calls `verify_chains`.

The log is several chains side by side (`chain`, a small number): a row joins the chain its interaction's id picks,
so appends to different chains never wait for each other (on Postgres each chain's appends are ordered by a lock of
its own, held to the commit; one lock for the whole log made every decision of every worker wait for the one before
it to be synced). Chain 0 is the single chain of the stores written before, continued as it was: its rows and
checkpoints hash and sign exactly as they did. Every other chain's rows and checkpoints name their chain, so a row or
a checkpoint moved to another chain does not fit there either. A store with one writer (SQLite) keeps one chain, 0.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import groupby
from operator import itemgetter
from typing import Any

GENESIS = "0" * 64
"""The 'previous hash' of the first row."""

FIELDS = ("at", "interaction_id", "kind", "server", "conversation", "outcome", "actor", "actor_name", "requester",
          "detail")
"""The columns the hash covers, in this order (the `audit` table's, without `id`, `hash` and `key_id`)."""

KEY_ENV = "MCP_BRIDGE_AUDIT_KEY"
"""The HMAC key ring: 32 random bytes, base64; several separated by commas to rotate (the first hashes new rows)."""


def key_id(key: bytes) -> str:
    """A key's name in the rows it hashed: a short digest that says nothing of the key itself."""
    return hashlib.sha256(b"mcp-chat-bridge audit key id\x00" + key).hexdigest()[:16]


_LINKED = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
"""What `link` hashes: `json.dumps(..., ensure_ascii=False, separators=(",", ":"))`, the encoder built once (a row is
linked on every decision)."""


def link(previous: str | None, values: Sequence[Any], key: bytes | None = None, chain: int = 0) -> str:
    """The hash of a row with these `values` (in `FIELDS` order) that follows a row hashed `previous` in `chain`:
    HMAC-SHA256 with `key`, or plain SHA-256 without one."""
    if len(values) != len(FIELDS):
        raise ValueError(f"an audit row has {len(FIELDS)} fields, not {len(values)}")
    # JSON keeps types apart (1 vs "1", None vs "") and floats exact (repr round-trips), so equal text means equal rows.
    # Chain 0 hashes as the single chain always did; another chain's number is hashed too (one more element, so no
    # body of one chain is ever that of another).
    head = [previous or GENESIS] if chain == 0 else [previous or GENESIS, chain]
    body = _LINKED.encode([*head, *values]).encode("utf-8")
    if key is None:
        return hashlib.sha256(body).hexdigest()
    return hmac.digest(key, body, "sha256").hex()  # what `hmac.new(...).hexdigest()` gives, in one call


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A chain's head as it stood: `rows` rows of `chain` up to the row `row_id`, the newest hashed `head`; signed at
    `at`."""

    rows: int
    row_id: int
    head: str
    at: int
    signature: str = ""
    """Ed25519 over `message()`, base64."""
    chain: int = 0

    def message(self) -> bytes:
        if self.chain == 0:  # as checkpoints were signed before the log had several chains
            return f"mcp-chat-bridge audit checkpoint v1\n{self.rows}\n{self.row_id}\n{self.head}\n{self.at}".encode()
        return (f"mcp-chat-bridge audit checkpoint v2\n{self.chain}\n{self.rows}\n{self.row_id}\n{self.head}\n"
                f"{self.at}").encode()

    def record(self) -> dict[str, Any]:
        """One line of a checkpoint file, and what the log line says."""
        return {"chain": self.chain, "rows": self.rows, "row_id": self.row_id, "head": self.head, "at": self.at,
                "signature": self.signature}

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> Checkpoint:
        """Raises ValueError for a record that is not one (one without `chain` is chain 0's, as all were before)."""
        try:
            rows, row_id, at = (int(data[k]) for k in ("rows", "row_id", "at"))
            head, signature, chain = str(data["head"]), str(data["signature"]), int(data.get("chain", 0))
        except (KeyError, TypeError, ValueError, AttributeError):
            raise ValueError("not a checkpoint record (rows, row_id, head, at, signature)") from None
        return cls(rows, row_id, head, at, signature, chain)

    @property
    def when(self) -> str:
        return datetime.fromtimestamp(self.at, UTC).isoformat(timespec="seconds")


@dataclass(frozen=True, slots=True)
class Broken:
    row_id: int
    position: int
    """1-based place in the log of the first row that cannot be vouched for."""
    reason: str


@dataclass(frozen=True, slots=True)
class Verdict:
    rows: int
    head: str
    """The newest intact row's hash (GENESIS for an empty log)."""
    broken: Broken | None
    keyed: int = 0
    """Rows hashed with a key of the ring."""
    checkpointed: int = 0
    """Rows up to the newest checkpoint that matched (0: none)."""
    checkpoints: int = 0
    key_ids: tuple[str, ...] = field(default=())


Row = tuple[int, Sequence[Any], str | None, str | None]
"""`(id, values in FIELDS order, stored hash, key id)`."""


def verify(rows: Iterable[Row], ring: Mapping[str, bytes] | None = None,
           checkpoints: Sequence[Checkpoint] = (), chain: int = 0) -> Verdict:
    """Check one chain's rows in id order against the key `ring` (key id -> key) and the chain's checkpoints whose
    signatures were already checked. The first row whose stored hash is not what its fields and its predecessor's
    stored hash give, whose key the ring lacks, or whose head or place a checkpoint contradicts is the broken link; a
    checkpoint naming a row the store no longer has means rows were removed from the end (or the store was rolled
    back)."""
    ring = ring or {}
    at_row: dict[int, list[Checkpoint]] = {}
    for checkpoint in checkpoints:
        at_row.setdefault(checkpoint.row_id, []).append(checkpoint)
    previous, count, keyed, checkpointed, last_id = GENESIS, 0, 0, 0, 0
    used: set[str] = set()
    since_id, since_head, fresh = 0, GENESIS, True
    """The first row after the newest checkpoint that held (its id), the head at that checkpoint."""

    def verdict(broken: Broken | None, head: str | None = None) -> Verdict:
        return Verdict(count if broken is None else broken.position - 1, head or previous, broken, keyed,
                       checkpointed, len(checkpoints), tuple(sorted(used)))

    for count, (row_id, values, stored, kid) in enumerate(rows, start=1):
        if fresh:
            since_id, since_head, fresh = row_id, previous, False
        if not stored:
            return verdict(Broken(row_id, count, "has no hash (written without the chain, or its hash was removed)"))
        if kid:
            key = ring.get(kid)
            if key is None:
                return verdict(Broken(row_id, count, f"was hashed with audit key {kid}, which {KEY_ENV} does not "
                                                     "hold (keep retired keys after the current one)"))
            keyed += 1
            used.add(kid)
        elif keyed:
            return verdict(Broken(row_id, count, "was hashed without a key after keyed rows: rewritten by someone "
                                                 "without the key"))
        else:
            key = None
        if link(previous, values, key, chain) != stored:
            reason = ("its fields or its hash were changed, or the row before it was changed, removed or added"
                      if count > 1 else "its fields or its hash were changed, or rows before it were removed")
            return verdict(Broken(row_id, count, reason))
        here = at_row.pop(row_id, [])
        wrong = next((c for c in here if (c.head, c.rows) != (stored, count)), None)
        if wrong is not None:
            # Every row since the last checkpoint that held may be part of the other history.
            return verdict(Broken(since_id, checkpointed + 1,
                                  f"the checkpoint of {wrong.when} names another history at row {count} (id {row_id}: "
                                  f"{wrong.rows} rows, head {wrong.head[:16]}…): the rows from here on were rewritten "
                                  "or the store was rolled back"), since_head)
        if here:
            checkpointed, fresh = count, True
        previous, last_id = stored, row_id
    if at_row:
        checkpoint = max((c for cs in at_row.values() for c in cs), key=lambda c: c.row_id)
        if checkpoint.row_id > last_id:
            return verdict(Broken(last_id + 1, count + 1, f"missing: the checkpoint of {checkpoint.when} names "
                                                          f"{checkpoint.rows} rows up to id {checkpoint.row_id}, the "
                                                          f"store has {count}: rows were removed from the end or "
                                                          "the store was rolled back"))
        checkpoint = min((c for cs in at_row.values() for c in cs), key=lambda c: c.row_id)
        return verdict(Broken(checkpoint.row_id, checkpoint.rows, f"missing: the checkpoint of {checkpoint.when} "
                                                                  f"names row id {checkpoint.row_id}, which the "
                                                                  "store no longer has"))
    return verdict(None)


def verify_chains(rows: Iterable[tuple[int, Row]], ring: Mapping[str, bytes] | None = None,
                  checkpoints: Sequence[Checkpoint] = ()) -> dict[int, Verdict]:
    """`verify` each chain: `rows` as `(chain, row)`, ordered by chain and then id. A chain that only checkpoints
    name (every row of it gone) is checked too, and found missing."""
    ring = ring or {}
    by_chain: dict[int, list[Checkpoint]] = {}
    for checkpoint in checkpoints:
        by_chain.setdefault(checkpoint.chain, []).append(checkpoint)
    verdicts = {number: verify((row for _, row in group), ring, by_chain.pop(number, ()), number)
                for number, group in groupby(rows, key=itemgetter(0))}
    verdicts.update({number: verify((), ring, left, number) for number, left in by_chain.items()})
    return dict(sorted(verdicts.items()))
