"""The store's rows for per-person OAuth sign-ins in flight, so that a sign-in's redirect may reach any worker.

The worker that started a sign-in (its `worker`) keeps the PKCE verifier in memory and is the only one that can
exchange the code; a row says who that is. A redirect that reaches another worker is handed over here: the row moves
from `pending` to `returned` with the code (or the refusal), atomically, so a state is used once across workers; the
owner takes it (`exchanging`) and records how the sign-in ended (`signed_in`, or `failed` with the reason in plain
words), which the other worker's page waits for. Every change is announced on the decisions channel as
`signin:<state hash>` (the workers' one listener, `bridge.storage.watch.DecisionWatch.changed`), with polling as the
fallback.

Rows are keyed by a SHA-256 of the `state`, never the state itself; the code is kept only until the sign-in ends.
Mixed into `SqlStore`; both engines (a SQLite store is one process, which never needs them).
"""

from __future__ import annotations

import time

from bridge.storage.driver import Driver, Row, Step
from bridge.storage.rows import SigninRow, SigninStatus

SIGNAL_PREFIX = "signin:"
"""What a change of a sign-in row is announced as, before its state hash."""
KEEP_ENDED = 3600.0
"""Seconds an ended or expired row is kept (a late page can still say how it ended) before the next start drops it."""

_COLUMNS = "s.state_hash, s.server, s.person, s.worker, s.status, s.expires_at, s.code, s.iss, s.error"


def _row(row: Row, now: float) -> SigninRow:
    lease = row[9]
    status: SigninStatus = row[4]
    return SigninRow(str(row[0]), str(row[1]), str(row[2]), str(row[3]), status, float(row[5]), row[6], row[7],
                     row[8], lease is not None and float(lease) >= now)


class SigninRows:
    _db: Driver
    worker_id: str

    def _signal(self, payload: str) -> list[Step]:
        """The guarded steps that announce `payload` to every worker listening to decisions (none on SQLite)."""
        raise NotImplementedError

    async def save_signin(self, state_hash: str, server: str, person: str, expires_at: float) -> None:
        """A sign-in this worker started (and alone can finish)."""
        now = time.time()
        await self._db.transaction([
            Step("INSERT INTO signins (state_hash, server, person, worker, status, expires_at, created_at)"
                 " VALUES (?,?,?,?,?,?,?)", (state_hash, server, person, self.worker_id, "pending", expires_at, now)),
            Step("DELETE FROM signins WHERE expires_at < ?", (now - KEEP_ENDED,))])

    async def signin(self, state_hash: str, *, now: float | None = None) -> SigninRow | None:
        now = time.time() if now is None else now
        rows = await self._db.fetch(f"SELECT {_COLUMNS}, w.lease_until FROM signins s LEFT JOIN workers w"
                                    " ON w.id = s.worker WHERE s.state_hash = ?", (state_hash,))
        return _row(rows[0], now) if rows else None

    async def return_signin(self, state_hash: str, code: str | None, iss: str | None, error: str | None, *,
                            now: float | None = None) -> bool:
        """Hand a redirect's code (or its refusal, `error`) to the worker that started the sign-in: False if it was
        not waiting for one any more (used, ended or expired), and then nothing changed."""
        now = time.time() if now is None else now
        done = await self._db.transaction([
            Step("UPDATE signins SET status = 'returned', code = ?, iss = ?, error = ? WHERE state_hash = ?"
                 " AND status = 'pending' AND expires_at > ?", (code, iss, error, state_hash, now)),
            *self._signal(SIGNAL_PREFIX + state_hash)])
        return done[0].count == 1

    async def use_signin(self, state_hash: str, *, now: float | None = None) -> bool:
        """The redirect reached the worker that started the sign-in: mark it used (False: it already was, or it
        ended or expired)."""
        now = time.time() if now is None else now
        done = await self._db.transaction([Step(
            "UPDATE signins SET status = 'exchanging' WHERE state_hash = ? AND status = 'pending' AND expires_at > ?",
            (state_hash, now))])
        return done[0].count == 1

    async def take_signin(self, state_hash: str) -> SigninRow | None:
        """The code (or refusal) another worker handed over for a sign-in of this worker's, taken once."""
        done = await self._db.transaction([Step(
            "UPDATE signins SET status = 'exchanging' WHERE state_hash = ? AND status = 'returned' AND worker = ?"
            " RETURNING state_hash, server, person, worker, status, expires_at, code, iss, error, NULL",
            (state_hash, self.worker_id))])
        rows = done[0].rows
        return _row(rows[0], time.time()) if rows else None

    async def end_signin(self, state_hash: str, error: str | None) -> bool:
        """Record how a sign-in ended: signed in (`error` None) or not, once (False: it had already ended)."""
        done = await self._db.transaction([
            Step("UPDATE signins SET status = ?, error = ?, code = NULL WHERE state_hash = ?"
                 " AND status NOT IN ('signed_in', 'failed')",
                 ("signed_in" if error is None else "failed", error, state_hash)),
            *self._signal(SIGNAL_PREFIX + state_hash)])
        return done[0].count == 1
