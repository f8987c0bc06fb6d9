"""The audit log's keys, from the environment: the HMAC ring that hashes rows and the Ed25519 key that signs
checkpoints (`bridge.storage.audit`). Messages name the variables, never their values.

- `MCP_BRIDGE_AUDIT_KEY`: 32 random bytes, base64 (`openssl rand -base64 32`); several separated by commas rotate keys:
  the first hashes new rows, all of them check old ones.
- `MCP_BRIDGE_AUDIT_SIGNING_KEY`: an Ed25519 private key: 32 random bytes, base64 (`openssl rand -base64 32`), or PEM.
- `MCP_BRIDGE_AUDIT_PUBLIC_KEY`: where only checking is done (`audit --verify` away from the bridge): the public key,
  base64 (`mcp-chat-bridge audit --public-key-of-signing-key` prints it) or PEM.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from bridge.errors import ConfigError
from bridge.storage.audit import KEY_ENV, Checkpoint, key_id

logger = logging.getLogger(__name__)

SIGNING_KEY_ENV = "MCP_BRIDGE_AUDIT_SIGNING_KEY"
PUBLIC_KEY_ENV = "MCP_BRIDGE_AUDIT_PUBLIC_KEY"
KEY_BYTES = 32
DEFAULT_EVERY = 100


def _b64(text: str) -> bytes:
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_" if "-" in text or "_" in text else None)
    except (binascii.Error, ValueError):
        return b""


def ring(env: Mapping[str, str] | None = None) -> dict[str, bytes]:
    """Key id -> key, the current key first (empty: no key configured)."""
    value = (os.environ if env is None else env).get(KEY_ENV, "")
    keys: dict[str, bytes] = {}
    for part in value.replace(",", " ").split():
        key = _b64(part)
        if len(key) != KEY_BYTES:
            raise ConfigError([f"{KEY_ENV}: each key must be {KEY_BYTES} random bytes, base64-encoded "
                               "(`openssl rand -base64 32`)"])
        keys[key_id(key)] = key
    return keys


def signing_key(env: Mapping[str, str] | None = None) -> Ed25519PrivateKey | None:
    value = (os.environ if env is None else env).get(SIGNING_KEY_ENV, "").strip()
    if not value:
        return None
    if value.startswith("-----BEGIN"):
        try:
            key = serialization.load_pem_private_key(value.encode(), password=None)
        except (ValueError, TypeError, UnsupportedAlgorithm):
            key = None
        if isinstance(key, Ed25519PrivateKey):
            return key
    elif len(seed := _b64(value)) == KEY_BYTES:
        return Ed25519PrivateKey.from_private_bytes(seed)
    raise ConfigError([f"{SIGNING_KEY_ENV}: must be an Ed25519 private key: {KEY_BYTES} random bytes, base64 "
                       "(`openssl rand -base64 32`), or an unencrypted PEM (`openssl genpkey -algorithm ed25519`)"])


def public_key(text: str, where: str) -> Ed25519PublicKey:
    """A public key given as base64 of its 32 bytes, as PEM, or as the name of a file holding either."""
    text = text.strip()
    if text and not text.startswith("-----BEGIN") and len(_b64(text)) != KEY_BYTES and Path(text).is_file():
        text = Path(text).read_text("utf-8").strip()
    try:
        if text.startswith("-----BEGIN"):
            key = serialization.load_pem_public_key(text.encode())
            if isinstance(key, Ed25519PublicKey):
                return key
        elif len(raw := _b64(text)) == KEY_BYTES:
            return Ed25519PublicKey.from_public_bytes(raw)
    except (ValueError, UnsupportedAlgorithm):
        pass
    raise ConfigError([f"{where}: must be an Ed25519 public key: {KEY_BYTES} bytes base64, PEM, or a file holding "
                       "either"])


def verifying_key(option: str | None, env: Mapping[str, str] | None = None) -> Ed25519PublicKey | None:
    """The key checkpoints are checked with: `--public-key`, else `MCP_BRIDGE_AUDIT_PUBLIC_KEY`, else the signing
    key's own (None: none of them is given)."""
    given = option or (os.environ if env is None else env).get(PUBLIC_KEY_ENV, "")
    if given:
        return public_key(given, "--public-key" if option else PUBLIC_KEY_ENV)
    signer = signing_key(env)
    return signer.public_key() if signer is not None else None


def public_text(key: Ed25519PublicKey) -> str:
    return base64.b64encode(key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)).decode()


def sign(key: Ed25519PrivateKey, checkpoint: Checkpoint) -> Checkpoint:
    signature = base64.b64encode(key.sign(checkpoint.message())).decode()
    return dataclasses.replace(checkpoint, signature=signature)


def signed_by(key: Ed25519PublicKey, checkpoint: Checkpoint) -> bool:
    try:
        key.verify(_b64(checkpoint.signature), checkpoint.message())
    except InvalidSignature:
        return False
    return True


@dataclass(frozen=True, slots=True)
class AuditSettings:
    """What the store needs to write the audit log: the HMAC ring, the signing key, and where checkpoints go."""

    ring: Mapping[str, bytes] = field(default_factory=dict, repr=False)
    signer: Ed25519PrivateKey | None = field(default=None, repr=False)
    every: int = DEFAULT_EVERY
    """A checkpoint of a chain at least every this many rows this process appends to it (and at every clean stop)."""
    file: Path | None = None
    """An append-only file of checkpoints (one JSON object a line), for an operator to ship away."""
    warn: bool = False
    """Log `warnings()` once, when this process appends its first audit row (`run`: a start that fails says only why;
    a bridge that records decisions says what their record lacks)."""

    @classmethod
    def from_env(cls, every: int = DEFAULT_EVERY, file: str | Path | None = None,
                 env: Mapping[str, str] | None = None, *, warn: bool = False) -> AuditSettings:
        return cls(ring(env), signing_key(env), every, Path(file) if file else None, warn)

    @property
    def current(self) -> tuple[str, bytes] | None:
        """The key new rows are hashed with."""
        return next(iter(self.ring.items()), None)

    def warnings(self) -> list[str]:
        """What a person starting the bridge should know about the log's protection."""
        out = []
        if not self.ring:
            out.append(f"audit: {KEY_ENV} is not set: the audit chain is unkeyed, so anyone who can write the store "
                       "can rewrite it unseen")
        if self.signer is None:
            out.append(f"audit: {SIGNING_KEY_ENV} is not set: no signed checkpoints, so rows removed from the end "
                       "or a store rolled back to a copy go unseen")
        return out
