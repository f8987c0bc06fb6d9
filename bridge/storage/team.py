"""The store's rows for team approvals: grants ("allow this again") and the daily LLM token usage budgets count.
Mixed into `SqlStore`; both engines."""

from __future__ import annotations

from collections.abc import Sequence

from bridge.storage.driver import Driver, Step


class TeamRows:
    _db: Driver

    async def save_grant(self, grant_id: str, place: str, expires_at: float | None, body: str) -> None:
        await self._db.transaction([Step("INSERT INTO grants (id, place, expires_at, body) VALUES (?,?,?,?)",
                                         (grant_id, place, expires_at, body))])

    async def grants(self, places: Sequence[str], now: float) -> list[str]:
        """Bodies of the grants in these places that are neither revoked nor expired at `now`, oldest first."""
        if not places:
            return []
        marks = ",".join("?" * len(places))
        order = "rowid" if self._db.dialect == "sqlite" else "pos"
        rows = await self._db.fetch(f"SELECT body FROM grants WHERE place IN ({marks}) AND revoked IS NULL AND"
                                    f" (expires_at IS NULL OR expires_at > ?) ORDER BY {order}", (*places, now))
        return [str(r[0]) for r in rows]

    async def all_grants(self, now: float) -> list[str]:
        """Bodies of every grant that holds at `now`, wherever it holds, oldest first (for operators)."""
        order = "rowid" if self._db.dialect == "sqlite" else "pos"
        rows = await self._db.fetch("SELECT body FROM grants WHERE revoked IS NULL AND (expires_at IS NULL OR"
                                    f" expires_at > ?) ORDER BY {order}", (now,))
        return [str(r[0]) for r in rows]

    async def revoke_grant(self, grant_id: str, by: str) -> bool:
        done = await self._db.transaction([Step("UPDATE grants SET revoked = ? WHERE id = ? AND revoked IS NULL",
                                                (by, grant_id))])
        return done[0].count > 0

    async def add_usage(self, day: str, subjects: Sequence[str], tokens: int) -> None:
        if subjects:
            await self._db.transaction([Step(
                "INSERT INTO usage (day, subject, tokens) VALUES (?,?,?) ON CONFLICT (day, subject) DO UPDATE"
                " SET tokens = usage.tokens + excluded.tokens", (day, s, tokens)) for s in subjects])

    async def usage(self, day: str, subject: str) -> int:
        rows = await self._db.fetch("SELECT tokens FROM usage WHERE day = ? AND subject = ?", (day, subject))
        return int(rows[0][0]) if rows else 0

    async def usage_on(self, day: str) -> list[tuple[str, int]]:
        """Every subject's tokens on one day (for operators), by subject."""
        rows = await self._db.fetch("SELECT subject, tokens FROM usage WHERE day = ? ORDER BY subject", (day,))
        return [(str(r[0]), int(r[1])) for r in rows]
