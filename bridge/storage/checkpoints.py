"""Signed checkpoints of the audit chain (`bridge.storage.audit.Checkpoint`), made by the worker that appends rows.

At least every `AuditSettings.every` rows this process appends, and at a clean stop, the chain's head is signed and
kept three ways: a row of `audit_checkpoints` (for `audit --verify` on the store alone), one log line (logger
`LOGGER`, shown at every log level) and, when configured, one line appended to a file an operator ships away. The
two outside the store are what catch a store rolled back or cut short by someone who can write it.

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
        self.appended = 0
        """Rows this process appended since its last checkpoint (counted as their inserts run)."""
        self._warned = False

    async def due(self) -> None:
        """After rows were appended: a checkpoint if enough came since the last."""
        if self._settings.warn and not self._warned and self.appended:
            self._warned = True
            for warning in self._settings.warnings():
                logging.getLogger("bridge.audit").warning("%s", warning)
        if self._settings.signer is not None and self.appended >= self._settings.every:
            await self.make(minimum=self._settings.every)

    async def make(self, minimum: int = 1) -> Checkpoint | None:
        """Sign the head now (if at least `minimum` rows came since the last checkpoint); the checkpoint, or None."""
        signer = self._settings.signer
        if signer is None:
            return None
        async with self._lock:
            if self.appended < minimum:
                return None  # another task made it while this one waited
            appended, self.appended = self.appended, 0
            try:
                checkpoint = await self._make(signer)
            except (StoreError, OSError) as exc:
                self.appended += appended
                logger.warning("audit checkpoint not written: %s", exc)
                return None
        return checkpoint

    async def _make(self, signer: Ed25519PrivateKey) -> Checkpoint | None:
        head = await self._db.fetch("SELECT id, hash FROM audit ORDER BY id DESC LIMIT 1")
        if not head or not head[0][1]:
            return None
        row_id, digest = int(head[0][0]), str(head[0][1])
        # Ids follow the chain's order (appends are serialised to their commit), so every row up to the head is
        # committed once the head is visible.
        rows = int((await self._db.fetch("SELECT count(*) FROM audit WHERE id <= ?", (row_id,)))[0][0])
        checkpoint = sign(signer, Checkpoint(rows, row_id, digest, int(time.time())))
        await self._db.transaction([Step(
            "INSERT INTO audit_checkpoints (at, rows, row_id, head, signature) VALUES (?,?,?,?,?)",
            (checkpoint.at, checkpoint.rows, checkpoint.row_id, checkpoint.head, checkpoint.signature))])
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


async def stored(db: Reads) -> list[Checkpoint]:
    """The checkpoints kept in the store, oldest first."""
    rows = await db.fetch("SELECT rows, row_id, head, at, signature FROM audit_checkpoints ORDER BY id")
    return [Checkpoint(int(r[0]), int(r[1]), str(r[2]), int(r[3]), str(r[4])) for r in rows]
