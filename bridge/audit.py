"""The audit log's hash chain: each row carries a hash of its own fields and of the row before it.

Changing any field of a stored row, removing a row or putting one in between breaks the chain from that row on, and
`verify` names the first broken link. Removing the newest rows cannot be seen from the rows alone: `verify` reports the
head (the newest hash) so it can be written down elsewhere and compared later. Pure functions; the store calls
`link` when it appends a row, and `mcp-chat-bridge audit --verify` calls `verify`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

GENESIS = "0" * 64
"""The 'previous hash' of the first row."""

FIELDS = ("at", "interaction_id", "kind", "server", "conversation", "outcome", "actor", "actor_name", "requester",
          "detail")
"""The columns the hash covers, in this order (the `audit` table's, without `id` and `hash`)."""


def link(previous: str | None, values: Sequence[Any]) -> str:
    """The hash of a row with these `values` (in `FIELDS` order) that follows a row hashed `previous`."""
    if len(values) != len(FIELDS):
        raise ValueError(f"an audit row has {len(FIELDS)} fields, not {len(values)}")
    # JSON keeps types apart (1 vs "1", None vs "") and floats exact (repr round-trips), so equal text means equal rows.
    body = json.dumps([previous or GENESIS, *values], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class Broken:
    row_id: int
    position: int
    """1-based place in the log."""
    reason: str


@dataclass(frozen=True, slots=True)
class Verdict:
    rows: int
    head: str
    """The newest row's hash (GENESIS for an empty log)."""
    broken: Broken | None


def verify(rows: Iterable[tuple[int, Sequence[Any], str | None]]) -> Verdict:
    """Check `(id, values, stored hash)` rows in id order; the first row whose stored hash is not what its fields and
    its predecessor's stored hash give is the broken link."""
    previous = GENESIS
    count = 0
    for count, (row_id, values, stored) in enumerate(rows, start=1):
        if not stored:
            return Verdict(count, previous, Broken(row_id, count, "has no hash (written without the chain)"))
        if link(previous, values) != stored:
            reason = ("its fields or its hash were changed, or the row before it was changed, removed or added"
                      if count > 1 else "its fields or its hash were changed, or rows before it were removed")
            return Verdict(count, previous, Broken(row_id, count, reason))
        previous = stored
    return Verdict(count, previous, None)
