"""The store's rows for OAuth tokens: sealed blobs (`bridge.auth.tokens.Cipher` seals them before they get here),
one per (server, identity, kind), where every worker on the store sees them. Mixed into `SqlStore`; both engines."""

from __future__ import annotations

import time

from bridge.storage.driver import Driver, Step


class TokenRows:
    _db: Driver

    async def sealed_token(self, server: str, identity: str, kind: str) -> bytes | None:
        rows = await self._db.fetch("SELECT blob FROM oauth_tokens WHERE server = ? AND identity = ? AND kind = ?",
                                    (server, identity, kind))
        return bytes(rows[0][0]) if rows else None

    async def keep_sealed_token(self, server: str, identity: str, kind: str, blob: bytes) -> None:
        await self._db.transaction([Step(
            "INSERT INTO oauth_tokens (server, identity, kind, blob, updated) VALUES (?,?,?,?,?) ON CONFLICT"
            " (server, identity, kind) DO UPDATE SET blob = excluded.blob, updated = excluded.updated",
            (server, identity, kind, blob, time.time()))])

    async def forget_tokens(self, server: str, identity: str) -> None:
        await self._db.transaction([Step("DELETE FROM oauth_tokens WHERE server = ? AND identity = ?",
                                         (server, identity))])

    async def token_servers(self, identity: str, kind: str) -> list[str]:
        rows = await self._db.fetch("SELECT server FROM oauth_tokens WHERE identity = ? AND kind = ? ORDER BY server",
                                    (identity, kind))
        return [str(r[0]) for r in rows]

    async def token_identities(self, server: str, kind: str) -> list[str]:
        rows = await self._db.fetch("SELECT identity FROM oauth_tokens WHERE server = ? AND kind = ? ORDER BY"
                                    " identity", (server, kind))
        return [str(r[0]) for r in rows]


class TokenTable(TokenRows):
    """Only the token rows of a store, on a driver of their own (the token vault's, `bridge.auth.tokens`)."""

    def __init__(self, driver: Driver) -> None:
        self._db = driver

    async def aclose(self) -> None:
        await self._db.aclose()


async def open_token_table(url: str) -> TokenTable:
    """The token rows of the Postgres store at `url` (its schema brought up to date first)."""
    from bridge.storage.migrations import migrate
    from bridge.storage.postgres import PostgresDriver

    driver = await PostgresDriver.open(url, max_size=2)
    try:
        await migrate(driver)
    except BaseException:
        await driver.aclose()
        raise
    return TokenTable(driver)
