"""OAuth tokens on a Postgres store: kept in its `oauth_tokens` table, sealed, and seen by every worker on it."""

from __future__ import annotations

import base64
import secrets

import psycopg
import pytest

from bridge.auth.tokens import CLIENT, TOKENS, Cipher, StoreVault
from bridge.config.auth import default_token_store
from bridge.errors import TokenStoreError

pytestmark = pytest.mark.anyio

SERVER = "https://mcp.example/mcp"


async def test_two_workers_share_sealed_tokens_in_the_store(pg_url: str) -> None:
    cipher = Cipher.from_env("K", {"K": base64.b64encode(secrets.token_bytes(32)).decode()})
    one, two = StoreVault(pg_url, cipher), StoreVault(pg_url, cipher)
    try:
        await one.put(SERVER, "slack:U1", TOKENS, {"token": {"access_token": "secret-at-1"}})
        await one.put(SERVER, "slack:U1", CLIENT, {"client_id": "c1"})
        # Another worker reads what the first signed in, and a refresh by it is what the first reads next.
        assert await two.get(SERVER, "slack:U1", TOKENS) == {"token": {"access_token": "secret-at-1"}}
        await two.put(SERVER, "slack:U1", TOKENS, {"token": {"access_token": "secret-at-2"}})
        assert await one.get(SERVER, "slack:U1", TOKENS) == {"token": {"access_token": "secret-at-2"}}
        assert await one.servers("slack:U1") == [SERVER] and await one.servers("slack:U2") == []
        with psycopg.connect(pg_url) as raw:
            blobs = [bytes(r[0]) for r in raw.execute("SELECT blob FROM oauth_tokens").fetchall()]
        assert len(blobs) == 2 and not [b for b in blobs if b"secret-at" in b or b"c1" in b]  # sealed at rest
        other = StoreVault(pg_url, Cipher.from_env("K", {"K": base64.b64encode(secrets.token_bytes(32)).decode()}))
        try:
            with pytest.raises(TokenStoreError):
                await other.get(SERVER, "slack:U1", TOKENS)  # another key opens nothing
        finally:
            await other.aclose()
        await two.forget(SERVER, "slack:U1")
        assert await one.get(SERVER, "slack:U1", TOKENS) is None
    finally:
        await one.aclose()
        await two.aclose()


def test_a_postgres_store_keeps_the_tokens_itself() -> None:
    url = "postgresql://bridge:${PGPASSWORD}@db/bridge"
    assert default_token_store(url) == url
    assert default_token_store("/var/lib/bridge/main.db") == "/var/lib/bridge/main.tokens.db"
