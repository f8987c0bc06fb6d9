"""Making a receipt (a compact JWS) from a decision, and checking one.

The claims: `iss` (the bridge), `aud` (the server's configured name), `jti` (single-use id), `iat`/`exp`, `kind` (what
was decided: `tool`, `form`, `url`, `sampling`, `roots`), `outcome`, `req` (the digest of the request,
`bridge.safety.receipts.canonical`), `cnt` (the digest of the content given, where some was), `by` (every approver's
`platform:user`), `rule` (what made their decision enough), `conv` (the conversation), `iid` (the card), and `tool`
for a tool call. The header names the key (`kid`, its JWK thumbprint) and `typ: mcp-receipt+jwt`.

Signed with `alg: EdDSA` (RFC 8037), which every JOSE library checks. joserfc warns that RFC 9864 prefers the
fully-specified `Ed25519` name; the older name is kept on purpose, since verifiers in the field know it and it
means the same key type here (Ed25519 only, never Ed448).
"""

from __future__ import annotations

import json
import secrets
import time
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from joserfc import jws
from joserfc.errors import JoseError, SecurityWarning
from joserfc.jwk import KeySet, OKPKey

from bridge.errors import BridgeError
from bridge.safety.receipts.keys import ReceiptSettings, kid

META_KEY = "io.github.mcp-chat-bridge/receipt"
"""The `_meta` key a receipt travels under."""
ALG = "EdDSA"
TYP = "mcp-receipt+jwt"
LEEWAY = 30.0
"""Seconds of clock difference tolerated when checking `iat` and `exp`."""


class ReceiptInvalid(BridgeError):
    """A receipt that does not verify: its text says why (bad signature, unknown key, expired, other request)."""


@dataclass(frozen=True, slots=True)
class Decision:
    """What a receipt states: one decision, in the terms a server can check."""

    kind: str
    server: str
    conversation: str
    interaction: str
    request: str
    """The request's digest (`bridge.safety.receipts.canonical`)."""
    by: tuple[str, ...]
    rule: Mapping[str, Any]
    outcome: str = "accept"
    content: str | None = None
    """The digest of what was given back (a form's content, the sampling answer, the roots), or None."""
    tool: str = ""


@dataclass(frozen=True, slots=True)
class Receipt:
    token: str
    jti: str
    claims: Mapping[str, Any]

    @property
    def sha256(self) -> str:
        """The token's own hash: what the audit row keeps, to match a receipt a server shows later."""
        import hashlib

        return hashlib.sha256(self.token.encode("ascii")).hexdigest()


def claims_of(settings: ReceiptSettings, decision: Decision, now: float, jti: str) -> dict[str, Any]:
    claims: dict[str, Any] = {
        "iss": settings.issuer, "aud": decision.server, "jti": jti, "iat": int(now),
        "exp": int(now + settings.lifetime), "kind": decision.kind, "outcome": decision.outcome,
        "req": decision.request, "by": list(decision.by), "rule": dict(decision.rule),
        "conv": decision.conversation, "iid": decision.interaction,
    }
    if decision.content is not None:
        claims["cnt"] = decision.content
    if decision.tool:
        claims["tool"] = decision.tool
    return claims


def mint(settings: ReceiptSettings, decision: Decision, now: float | None = None) -> Receipt:
    signer = settings.keys.signer
    if signer is None:
        raise ReceiptInvalid("no receipt key is configured")
    jti = secrets.token_urlsafe(16)
    claims = claims_of(settings, decision, time.time() if now is None else now, jti)
    header = {"alg": ALG, "typ": TYP, "kid": kid(signer.public_key())}
    payload = json.dumps(claims, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SecurityWarning)  # see the module's note on `EdDSA`
        token = jws.serialize_compact(header, payload, OKPKey.import_key(signer), algorithms=[ALG])
    return Receipt(token, jti, claims)


def key_set(keys: Iterable[Ed25519PublicKey] | Mapping[str, Any]) -> dict[str, OKPKey]:
    """Keys by id, from public keys or a JWKS document (keys of other types are skipped)."""
    if isinstance(keys, Mapping):
        try:
            found = KeySet.import_key_set(dict(keys)).keys  # type: ignore[arg-type]
        except (JoseError, ValueError, TypeError, KeyError) as exc:
            raise ReceiptInvalid(f"the key set could not be read: {exc}") from None
        return {str(k.kid or k.thumbprint()): k for k in found if isinstance(k, OKPKey)}
    return {kid(key): OKPKey.import_key(key) for key in keys}


def verify(token: str, keys: Iterable[Ed25519PublicKey] | Mapping[str, Any], *, now: float | None = None,
           audience: str | None = None, request: str | None = None, kinds: Sequence[str] = ()) -> dict[str, Any]:
    """The claims of a receipt that verifies: signed by one of `keys` (public keys or a JWKS), not expired, and (when
    given) for `audience`, for the request with digest `request`, of one of `kinds`. Raises ReceiptInvalid saying
    why not. Single use is the server's to enforce (remember each `jti` until its `exp`)."""
    parts = token.strip().split(".")
    if len(parts) != 3:
        raise ReceiptInvalid("not a compact JWS (three dot-separated parts)")
    try:
        header = json.loads(_unb64(parts[0]))
    except ValueError:
        raise ReceiptInvalid("the header is not base64url JSON") from None
    if not isinstance(header, dict) or header.get("alg") != ALG:
        raise ReceiptInvalid(f"the algorithm must be {ALG}")
    key = key_set(keys).get(str(header.get("kid", "")))
    if key is None:
        raise ReceiptInvalid("signed with a key that is not in the key set (kid unknown)")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SecurityWarning)
            claims = json.loads(jws.deserialize_compact(token.strip(), key, algorithms=[ALG]).payload)
    except (JoseError, ValueError):
        raise ReceiptInvalid("the signature does not verify") from None
    if not isinstance(claims, dict):
        raise ReceiptInvalid("the payload is not a JSON object")
    at = time.time() if now is None else now
    exp, iat = claims.get("exp"), claims.get("iat")
    if not isinstance(exp, int) or not isinstance(iat, int):
        raise ReceiptInvalid("exp and iat must be integers")
    if at > exp + LEEWAY:
        raise ReceiptInvalid(f"expired {int(at - exp)} s ago")
    if iat > at + LEEWAY:
        raise ReceiptInvalid("issued in the future")
    if audience is not None and claims.get("aud") != audience:
        raise ReceiptInvalid(f"issued for server {claims.get('aud')!r}, not {audience!r}")
    if kinds and claims.get("kind") not in kinds:
        raise ReceiptInvalid(f"a receipt for a {claims.get('kind')!r} decision")
    if request is not None and claims.get("req") != request:
        raise ReceiptInvalid("issued for another request (the request's digest differs)")
    if claims.get("outcome") != "accept":
        raise ReceiptInvalid("not a receipt of an approval")
    return claims


def _unb64(part: str) -> bytes:
    import base64

    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
