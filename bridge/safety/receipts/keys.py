"""The receipts' signing keys, from the environment, and the JWKS (RFC 7517) that publishes their public halves.

`MCP_BRIDGE_RECEIPT_KEY`: one or more Ed25519 private keys, separated by commas, each 32 random bytes in base64
(`openssl rand -base64 32`) or an unencrypted PEM (`openssl genpkey -algorithm ed25519`). The first signs new
receipts; the others stay in the JWKS, so receipts signed before a rotation still verify until they expire. Messages
name the variable, never its value. Unset: the bridge issues no receipts.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from bridge.errors import ConfigError

KEY_ENV = "MCP_BRIDGE_RECEIPT_KEY"
SEED_BYTES = 32
DEFAULT_LIFETIME = 300.0
DEFAULT_ISSUER = "mcp-chat-bridge"


def _b64(text: str) -> bytes:
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_" if "-" in text or "_" in text else None)
    except (binascii.Error, ValueError):
        return b""


def _private(text: str) -> Ed25519PrivateKey:
    if text.startswith("-----BEGIN"):
        try:
            key = serialization.load_pem_private_key(text.encode(), password=None)
        except (ValueError, TypeError, UnsupportedAlgorithm):
            key = None
        if isinstance(key, Ed25519PrivateKey):
            return key
    elif len(seed := _b64(text)) == SEED_BYTES:
        return Ed25519PrivateKey.from_private_bytes(seed)
    raise ConfigError([f"{KEY_ENV}: each key must be an Ed25519 private key: {SEED_BYTES} random bytes, base64 "
                       "(`openssl rand -base64 32`), or an unencrypted PEM (`openssl genpkey -algorithm ed25519`); "
                       "several are separated by commas"])


def kid(key: Ed25519PublicKey) -> str:
    """The key's id: its RFC 7638 JWK thumbprint (SHA-256, base64url), the same for anyone who computes it."""
    from joserfc.jwk import OKPKey  # loaded when receipts are made, not with the config

    return str(OKPKey.import_key(key).thumbprint())


def jwk(key: Ed25519PublicKey) -> dict[str, Any]:
    from joserfc.jwk import OKPKey

    public = dict(OKPKey.import_key(key).as_dict(private=False))
    return {**public, "kid": kid(key), "alg": "EdDSA", "use": "sig"}


@dataclass(frozen=True, slots=True)
class ReceiptKeys:
    """The key ring: the first key signs, all of them are published."""

    ring: tuple[Ed25519PrivateKey, ...] = field(default=(), repr=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ReceiptKeys:
        value = (os.environ if env is None else env).get(KEY_ENV, "")
        return cls(tuple(_private(part.strip()) for part in value.split(",") if part.strip()))

    @classmethod
    def generate(cls) -> ReceiptKeys:
        return cls((Ed25519PrivateKey.generate(),))

    @property
    def signer(self) -> Ed25519PrivateKey | None:
        return self.ring[0] if self.ring else None

    def public(self) -> list[Ed25519PublicKey]:
        return [key.public_key() for key in self.ring]

    def jwks(self) -> dict[str, Any]:
        """The JWKS document: every key of the ring, the signing one first."""
        return {"keys": [jwk(key) for key in self.public()]}


@dataclass(frozen=True, slots=True)
class ReceiptSettings:
    """Receipts as configured: the ring (from the environment), who signs them, and how long one is valid."""

    keys: ReceiptKeys = field(default_factory=ReceiptKeys)
    issuer: str = DEFAULT_ISSUER
    """The `iss` of every receipt: this bridge's name, as servers are told to expect it."""
    lifetime: float = DEFAULT_LIFETIME
    """Seconds from issue to expiry: long enough to reach the server, short enough that an old one is useless."""

    @property
    def enabled(self) -> bool:
        return self.keys.signer is not None
