"""OAuth tokens at rest: encrypted, keyed by (server, identity), never logged.

The vault knows nothing of OAuth; `VaultStorage` adapts one (server, identity) slot to the SDK's `TokenStorage`.
`server` is the MCP server's URL (a token obtained for one resource is never offered to another, even if a config
entry is later pointed elsewhere) and `identity` says whose account it is: `shared`, `service:<client id>`, or a
person's stable key (`slack:U123`) for `per_user` servers.

Every blob is sealed with AES-256-GCM. The key comes from an environment variable (32 random bytes, base64); several
keys separated by commas form a rotation ring: the first seals, any of them opens. The slot's address is the
associated data, so a blob copied into another slot (another person's) does not open.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import anyio
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from bridge.errors import ConfigError, TokenStoreError

KEY_BYTES = 32
_VERSION = b"\x01"
_KEY_ID = 8
_NONCE = 12

TOKENS, CLIENT = "tokens", "client"
"""The two kinds of slot the SDK keeps per (server, identity): its tokens and its client registration."""


class Cipher:
    """AES-256-GCM over a rotation ring of keys."""

    def __init__(self, keys: Sequence[bytes]) -> None:
        if not keys or any(len(k) != KEY_BYTES for k in keys):
            raise ValueError(f"every key must be {KEY_BYTES} bytes")
        self._ring = [(hashlib.sha256(k).digest()[:_KEY_ID], AESGCM(k)) for k in keys]

    @classmethod
    def from_env(cls, name: str, env: Mapping[str, str] | None = None) -> Cipher:
        """The ring in environment variable `name`. The message never quotes the value."""
        value = (os.environ if env is None else env).get(name, "")
        if not value.strip():
            raise ConfigError([f"{name}: the token encryption key is not set (32 random bytes, base64: "
                               "`openssl rand -base64 32`)"])
        keys: list[bytes] = []
        for part in value.replace(",", " ").split():
            try:
                key = base64.b64decode(part + "=" * (-len(part) % 4), altchars=b"-_", validate=False)
            except (binascii.Error, ValueError):
                key = b""
            if len(key) != KEY_BYTES:
                raise ConfigError([f"{name}: each key must be {KEY_BYTES} random bytes, base64-encoded "
                                   "(`openssl rand -base64 32`)"])
            keys.append(key)
        return cls(keys)

    def seal(self, plaintext: bytes, context: bytes) -> bytes:
        key_id, aead = self._ring[0]
        nonce = secrets.token_bytes(_NONCE)
        return _VERSION + key_id + nonce + aead.encrypt(nonce, plaintext, context)

    def open(self, blob: bytes, context: bytes) -> bytes:
        """Raises TokenStoreError if no key of the ring opens it (wrong key, tampered, or another slot's)."""
        if blob[:1] != _VERSION or len(blob) < 1 + _KEY_ID + _NONCE + 16:
            raise TokenStoreError("a stored token is not in a format this bridge reads")
        key_id, nonce, body = blob[1:1 + _KEY_ID], blob[1 + _KEY_ID:1 + _KEY_ID + _NONCE], blob[1 + _KEY_ID + _NONCE:]
        for candidate, aead in self._ring:
            if candidate == key_id:
                try:
                    return aead.decrypt(nonce, body, context)
                except InvalidTag:
                    break
        raise TokenStoreError("a stored token cannot be decrypted with the configured key")


class TokenVault(Protocol):
    """Where OAuth state is kept, one slot per (server, identity, kind)."""

    async def get(self, server: str, identity: str, kind: str) -> dict[str, Any] | None: ...

    async def put(self, server: str, identity: str, kind: str, value: Mapping[str, Any]) -> None: ...

    async def forget(self, server: str, identity: str) -> None:
        """Drop everything kept for this identity on this server (a logout)."""
        ...

    async def servers(self, identity: str) -> list[str]:
        """The servers this identity has tokens for (what `accounts` lists)."""
        ...

    async def people(self, server: str) -> list[str]:
        """The identities that have tokens for this server (the operator's `accounts`)."""
        ...

    @property
    def persistent(self) -> bool:
        """False when tokens live only as long as this process."""
        ...


class MemoryVault:
    """Tokens for this process only: used when no encryption key is configured (nothing is written anywhere)."""

    persistent = False

    def __init__(self) -> None:
        self._slots: dict[tuple[str, str, str], dict[str, Any]] = {}

    async def get(self, server: str, identity: str, kind: str) -> dict[str, Any] | None:
        value = self._slots.get((server, identity, kind))
        return dict(value) if value is not None else None

    async def put(self, server: str, identity: str, kind: str, value: Mapping[str, Any]) -> None:
        self._slots[(server, identity, kind)] = dict(value)

    async def forget(self, server: str, identity: str) -> None:
        for key in [k for k in self._slots if k[:2] == (server, identity)]:
            del self._slots[key]

    async def servers(self, identity: str) -> list[str]:
        return sorted({s for s, i, kind in self._slots if i == identity and kind == TOKENS})

    async def people(self, server: str) -> list[str]:
        return sorted({i for s, i, kind in self._slots if s == server and kind == TOKENS})


class SqliteVault:
    """Sealed blobs in a SQLite file readable by its owner only. Several processes may share it (a running bridge
    and an admin authorizing a server from a terminal); each write is one short transaction."""

    persistent = True

    def __init__(self, path: str | Path, cipher: Cipher) -> None:
        self.path = Path(path)
        self._cipher = cipher
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Created owner-only before SQLite opens it; SQLite gives its journal the same mode.
        os.close(os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600))
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=10.0, isolation_level=None)
        self._db.execute("CREATE TABLE IF NOT EXISTS oauth_tokens (server TEXT NOT NULL, identity TEXT NOT NULL, "
                         "kind TEXT NOT NULL, blob BLOB NOT NULL, updated REAL NOT NULL, "
                         "PRIMARY KEY (server, identity, kind))")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @staticmethod
    def _context(server: str, identity: str, kind: str) -> bytes:
        return json.dumps([server, identity, kind]).encode()

    async def get(self, server: str, identity: str, kind: str) -> dict[str, Any] | None:
        def read() -> bytes | None:
            with self._lock:
                row = self._db.execute("SELECT blob FROM oauth_tokens WHERE server = ? AND identity = ? AND kind = ?",
                                       (server, identity, kind)).fetchone()
            return bytes(row[0]) if row else None

        blob = await anyio.to_thread.run_sync(read)
        if blob is None:
            return None
        value: dict[str, Any] = json.loads(self._cipher.open(blob, self._context(server, identity, kind)))
        return value

    async def put(self, server: str, identity: str, kind: str, value: Mapping[str, Any]) -> None:
        blob = self._cipher.seal(json.dumps(dict(value)).encode(), self._context(server, identity, kind))

        def write() -> None:
            with self._lock:
                self._db.execute("INSERT OR REPLACE INTO oauth_tokens VALUES (?, ?, ?, ?, ?)",
                                 (server, identity, kind, blob, time.time()))

        await anyio.to_thread.run_sync(write)

    async def forget(self, server: str, identity: str) -> None:
        def delete() -> None:
            with self._lock:
                self._db.execute("DELETE FROM oauth_tokens WHERE server = ? AND identity = ?", (server, identity))

        await anyio.to_thread.run_sync(delete)

    async def servers(self, identity: str) -> list[str]:
        def read() -> list[str]:
            with self._lock:
                rows = self._db.execute("SELECT server FROM oauth_tokens WHERE identity = ? AND kind = ? "
                                        "ORDER BY server", (identity, TOKENS)).fetchall()
            return [str(r[0]) for r in rows]

        return await anyio.to_thread.run_sync(read)

    async def people(self, server: str) -> list[str]:
        def read() -> list[str]:
            with self._lock:
                rows = self._db.execute("SELECT identity FROM oauth_tokens WHERE server = ? AND kind = ? "
                                        "ORDER BY identity", (server, TOKENS)).fetchall()
            return [str(r[0]) for r in rows]

        return await anyio.to_thread.run_sync(read)


class VaultStorage:
    """The SDK's `TokenStorage` for one (server, identity) slot of a vault.

    The SDK keeps a token's lifetime as `expires_in` (seconds from when it was issued); stored as is, a token read
    back an hour later would look fresh. So the absolute expiry is stored beside it and `expires_in` is recomputed on
    every read (zero or less: already expired, so the SDK refreshes before using it).
    """

    def __init__(self, vault: TokenVault, server: str, identity: str) -> None:
        self.vault = vault
        self.server = server
        self.identity = identity

    async def get_tokens(self) -> OAuthToken | None:
        stored = await self.vault.get(self.server, self.identity, TOKENS)
        if stored is None:
            return None
        token = OAuthToken.model_validate(stored["token"])
        expires_at = stored.get("expires_at")
        if expires_at is not None:
            token.expires_in = math.floor(float(expires_at) - time.time())
        return token

    async def set_tokens(self, tokens: OAuthToken) -> None:
        expires_at = time.time() + tokens.expires_in if tokens.expires_in is not None else None
        await self.vault.put(self.server, self.identity, TOKENS,
                             {"token": tokens.model_dump(mode="json", exclude_none=True), "expires_at": expires_at})

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        stored = await self.vault.get(self.server, self.identity, CLIENT)
        return OAuthClientInformationFull.model_validate(stored) if stored is not None else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        await self.vault.put(self.server, self.identity, CLIENT, client_info.model_dump(mode="json", exclude_none=True))


class StoreVault:
    """Sealed blobs in the `oauth_tokens` table of a Postgres store, so that every bridge worker on it uses (and
    refreshes) the same tokens. Connects on first use; `aclose()` when done."""

    persistent = True

    def __init__(self, url: str, cipher: Cipher) -> None:
        self._url = url
        self._cipher = cipher
        self._table: SealedTokens | None = None
        self._opening = anyio.Lock()

    async def _rows(self) -> SealedTokens:
        async with self._opening:
            if self._table is None:
                from bridge.storage.token_rows import open_token_table

                self._table = await open_token_table(self._url)
            return self._table

    async def aclose(self) -> None:
        table, self._table = self._table, None
        if table is not None:
            await table.aclose()

    async def get(self, server: str, identity: str, kind: str) -> dict[str, Any] | None:
        blob = await (await self._rows()).sealed_token(server, identity, kind)
        if blob is None:
            return None
        value: dict[str, Any] = json.loads(self._cipher.open(blob, SqliteVault._context(server, identity, kind)))
        return value

    async def put(self, server: str, identity: str, kind: str, value: Mapping[str, Any]) -> None:
        blob = self._cipher.seal(json.dumps(dict(value)).encode(), SqliteVault._context(server, identity, kind))
        await (await self._rows()).keep_sealed_token(server, identity, kind, blob)

    async def forget(self, server: str, identity: str) -> None:
        await (await self._rows()).forget_tokens(server, identity)

    async def servers(self, identity: str) -> list[str]:
        return await (await self._rows()).token_servers(identity, TOKENS)

    async def people(self, server: str) -> list[str]:
        return await (await self._rows()).token_identities(server, TOKENS)


class SealedTokens(Protocol):
    async def sealed_token(self, server: str, identity: str, kind: str) -> bytes | None: ...
    async def keep_sealed_token(self, server: str, identity: str, kind: str, blob: bytes) -> None: ...
    async def forget_tokens(self, server: str, identity: str) -> None: ...
    async def token_servers(self, identity: str, kind: str) -> list[str]: ...
    async def token_identities(self, server: str, kind: str) -> list[str]: ...
    async def aclose(self) -> None: ...
