"""Tokens at rest: AES-GCM with a key ring from the environment, bound to their slot, in an owner-only file."""

from __future__ import annotations

import base64
import secrets
import stat
from pathlib import Path

import pytest
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from bridge.auth.tokens import CLIENT, TOKENS, Cipher, MemoryVault, SqliteVault, VaultStorage
from bridge.errors import ConfigError, TokenStoreError

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]


def key() -> str:
    return base64.b64encode(secrets.token_bytes(32)).decode()


def test_sealed_blobs_open_only_in_their_slot_with_a_key_of_the_ring() -> None:
    old, new = key(), key()
    sealed = Cipher.from_env("K", {"K": old}).seal(b"refresh-123", b"slot-a")
    rotated = Cipher.from_env("K", {"K": f"{new}, {old}"})
    assert rotated.open(sealed, b"slot-a") == b"refresh-123"  # an old blob still opens after rotation
    with pytest.raises(TokenStoreError):
        Cipher.from_env("K", {"K": new}).open(sealed, b"slot-a")  # the key that sealed it is gone
    with pytest.raises(TokenStoreError):
        rotated.open(sealed, b"slot-b")  # copied into another person's slot
    tampered = sealed[:-1] + bytes([sealed[-1] ^ 1])
    with pytest.raises(TokenStoreError):
        rotated.open(tampered, b"slot-a")
    # The first key of the ring seals: a blob sealed after rotation does not open with the old key alone.
    with pytest.raises(TokenStoreError):
        Cipher.from_env("K", {"K": old}).open(rotated.seal(b"y", b"s"), b"s")


def test_a_missing_or_malformed_key_is_refused_without_echoing_it() -> None:
    with pytest.raises(ConfigError) as missing:
        Cipher.from_env("TOKEN_KEY", {})
    assert "TOKEN_KEY" in missing.value.problems[0] and "openssl rand -base64 32" in missing.value.problems[0]
    with pytest.raises(ConfigError) as short:
        Cipher.from_env("TOKEN_KEY", {"TOKEN_KEY": "hunter2-not-a-key"})
    assert "32 random bytes" in short.value.problems[0] and "hunter2" not in short.value.problems[0]
    urlsafe = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")
    assert Cipher.from_env("K", {"K": urlsafe})  # url-safe, unpadded keys are fine too


async def test_the_file_holds_no_plaintext_and_only_its_owner_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "state" / "tokens.db"
    vault = SqliteVault(path, Cipher.from_env("K", {"K": key()}))
    try:
        await vault.put("https://mcp.example.com/mcp", "slack:U1", TOKENS, {"access": "at-SECRET-value-123"})
        assert await vault.get("https://mcp.example.com/mcp", "slack:U1", TOKENS) == {"access": "at-SECRET-value-123"}
        assert await vault.get("https://mcp.example.com/mcp", "slack:U2", TOKENS) is None
    finally:
        vault.close()
    data = b"".join(p.read_bytes() for p in path.parent.iterdir())
    assert b"at-SECRET-value-123" not in data and b"SECRET" not in data
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_another_key_cannot_read_the_file(tmp_path: Path) -> None:
    path = tmp_path / "tokens.db"
    first = SqliteVault(path, Cipher.from_env("K", {"K": key()}))
    await first.put("u", "shared", TOKENS, {"a": 1})
    first.close()
    second = SqliteVault(path, Cipher.from_env("K", {"K": key()}))
    try:
        with pytest.raises(TokenStoreError):
            await second.get("u", "shared", TOKENS)
    finally:
        second.close()


@pytest.mark.parametrize("persistent", [True, False])
async def test_forget_and_the_servers_an_identity_is_connected_to(tmp_path: Path, persistent: bool) -> None:
    vault = SqliteVault(tmp_path / "t.db", Cipher.from_env("K", {"K": key()})) if persistent else MemoryVault()
    assert vault.persistent is persistent
    await vault.put("https://a/mcp", "slack:U1", TOKENS, {"x": 1})
    await vault.put("https://a/mcp", "slack:U1", CLIENT, {"client_id": "c"})
    await vault.put("https://b/mcp", "slack:U1", TOKENS, {"x": 2})
    await vault.put("https://b/mcp", "slack:U2", TOKENS, {"x": 3})
    assert await vault.servers("slack:U1") == ["https://a/mcp", "https://b/mcp"]
    await vault.forget("https://a/mcp", "slack:U1")
    assert await vault.get("https://a/mcp", "slack:U1", CLIENT) is None
    assert await vault.servers("slack:U1") == ["https://b/mcp"]
    assert await vault.servers("slack:U2") == ["https://b/mcp"]
    if isinstance(vault, SqliteVault):
        vault.close()


async def test_a_stored_token_comes_back_with_the_time_it_has_left() -> None:
    slot = VaultStorage(MemoryVault(), "https://a/mcp", "shared")
    assert await slot.get_tokens() is None
    await slot.set_tokens(OAuthToken(access_token="a", expires_in=3600, refresh_token="r", scope="mcp"))
    back = await slot.get_tokens()
    assert back is not None and back.refresh_token == "r" and back.scope == "mcp"
    assert back.expires_in is not None and 3590 <= back.expires_in <= 3600
    await slot.set_tokens(OAuthToken(access_token="a", expires_in=-30))
    expired = await slot.get_tokens()
    assert expired is not None and expired.expires_in is not None and expired.expires_in < 0
    await slot.set_tokens(OAuthToken(access_token="b"))
    forever = await slot.get_tokens()
    assert forever is not None and forever.expires_in is None
    info = OAuthClientInformationFull(client_id="c1", client_secret="s1",
                                      redirect_uris=["http://127.0.0.1:1234/callback"])  # type: ignore[list-item]
    await slot.set_client_info(info)
    assert await slot.get_client_info() == info
