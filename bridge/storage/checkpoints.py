"""Signed checkpoints of the audit chains (`bridge.storage.audit.Checkpoint`), made by the worker that appends rows.

At least every `AuditSettings.every` rows this process appends to a chain, and at a clean stop, the head of each chain
it appended to is signed and kept three ways: a row of `audit_checkpoints` (for `audit --verify` on the store alone),
one log line (logger `LOGGER`, shown at every log level) and, when configured, one line appended to a file an operator
ships away. The two outside the store are what catch a store rolled back or cut short by someone who can write it.

A checkpoint that cannot be written is logged and tried again at the next row: the decision it follows is already
stored, and losing it would be worse than a late checkpoint.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import anyio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bridge.errors import StoreError
from bridge.storage.audit import Checkpoint
from bridge.storage.audit_keys import AuditSettings, sign
from bridge.storage.driver import Driver, Step

LOGGER = "bridge.audit.checkpoint"
logger = logging.getLogger(LOGGER)


class Checkpoints:
    def __init__(self, driver: Driver, settings: AuditSettings) -> None:
        self._db = driver
        self._settings = settings
        self._lock = anyio.Lock()
        self._appended: dict[int, int] = {}
        """Rows this process appended to each chain since its last checkpoint (counted once committed)."""
        self._warned = False

    def appended(self, chain: int) -> None:
        """A row appended to `chain` was committed (not called for a claim that lost)."""
        self._appended[chain] = self._appended.get(chain, 0) + 1

    async def due(self) -> None:
        """After rows were appended: a checkpoint of each chain that had enough since its last."""
        if self._settings.warn and not self._warned and self._appended:
            self._warned = True
            for warning in self._settings.warnings():
                logging.getLogger("bridge.audit").warning("%s", warning)
        if self._settings.signer is not None and max(self._appended.values(), default=0) >= self._settings.every:
            await self.make(minimum=self._settings.every)

    async def make(self, minimum: int = 1) -> list[Checkpoint]:
        """Sign now the head of each chain that had at least `minimum` rows appended since its last checkpoint; the
        checkpoints made."""
        signer = self._settings.signer
        if signer is None:
            return []
        made = []
        async with self._lock:
            # Those another task checkpointed while this one waited have a count below `minimum` again.
            for chain in sorted(c for c, n in self._appended.items() if n >= minimum):
                appended = self._appended.pop(chain)
                try:
                    checkpoint = await self._make(signer, chain)
                except (StoreError, OSError) as exc:
                    self._appended[chain] = self._appended.get(chain, 0) + appended
                    logger.warning("audit checkpoint not written: %s", exc)
                    continue
                if checkpoint is not None:
                    made.append(checkpoint)
        return made

    async def _make(self, signer: Ed25519PrivateKey, chain: int) -> Checkpoint | None:
        head = await self._db.fetch("SELECT id, hash FROM audit WHERE chain = ? ORDER BY id DESC LIMIT 1", (chain,))
        if not head or not head[0][1]:
            return None
        row_id, digest = int(head[0][0]), str(head[0][1])
        # Ids follow the chain's order (a chain's appends are serialised to their commit), so every row of the chain
        # up to the head is committed once the head is visible.
        rows = int((await self._db.fetch("SELECT count(*) FROM audit WHERE chain = ? AND id <= ?",
                                         (chain, row_id)))[0][0])
        checkpoint = sign(signer, Checkpoint(rows, row_id, digest, int(time.time()), chain=chain))
        await self._db.transaction([Step(
            "INSERT INTO audit_checkpoints (chain, at, rows, row_id, head, signature) VALUES (?,?,?,?,?,?)",
            (chain, checkpoint.at, checkpoint.rows, checkpoint.row_id, checkpoint.head, checkpoint.signature))])
        line = json.dumps(checkpoint.record(), separators=(",", ":"))
        if self._settings.file is not None:
            await anyio.to_thread.run_sync(_append, self._settings.file, line)
        logger.info("audit checkpoint %s", line)
        return checkpoint


def _append(path: Path, line: str) -> None:
    # O_APPEND: each line lands whole at the end, also with several workers sharing the file; synced, as it is the
    # copy that outlives a rolled-back store.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


class Reads(Protocol):
    async def fetch(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...


async def stored(db: Reads, *, chained: bool = True) -> list[Checkpoint]:
    """The checkpoints kept in the store, oldest first (`chained`: the store has chains, schema step 12)."""
    rows = await db.fetch(f"SELECT rows, row_id, head, at, signature, {'chain' if chained else '0'}"
                          " FROM audit_checkpoints ORDER BY id")
    return [Checkpoint(int(r[0]), int(r[1]), str(r[2]), int(r[3]), str(r[4]), int(r[5])) for r in rows]
