"""DPoP (RFC 9449) in front of the service-account server (`service_account`): its authorization server offers ES256
proofs, issues tokens bound to the proof's key (`token_type: DPoP`), and the MCP server accepts a bound token only
as `Authorization: DPoP` with a valid proof for that very request. Either may demand a nonce first
(`use_dpop_nonce`). Proofs are checked with PyJWT (the bridge signs with joserfc), as RFC 9449 §4.3 says.

An ASGI wrapper: the inner app keeps checking bearer tokens; a checked DPoP request reaches it as a bearer one.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

import jwt

NONCE = "server-nonce-1"


@dataclass
class DpopChecks:
    nonce_at_token: bool = False
    nonce_at_mcp: bool = False
    bound: dict[str, str] = field(default_factory=dict)
    """access token → thumbprint of the key it is bound to."""
    jtis: list[str] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    """Why a proof was refused (a nonce challenge included)."""
    schemes: list[str] = field(default_factory=list)
    """The Authorization scheme of each MCP request."""

    def check(self, proof: str | None, method: str, url: str, *, token: str | None, nonce: bool) -> str | None:
        """The proof's key thumbprint, or None (the reason in `refusals`)."""
        if not proof:
            self.refusals.append("no proof")
            return None
        try:
            header = jwt.get_unverified_header(proof)
            assert header.get("typ") == "dpop+jwt" and "d" not in header["jwk"]
            claims = jwt.decode(proof, jwt.PyJWK(header["jwk"], algorithm="ES256"), algorithms=["ES256"])
        except (jwt.PyJWTError, AssertionError, KeyError) as exc:
            self.refusals.append(f"bad proof: {exc}")
            return None
        problems = [what for what, ok in [
            ("htm", claims.get("htm") == method), ("htu", claims.get("htu") == url),
            ("iat", abs(time.time() - float(claims.get("iat", 0))) < 60), ("jti", claims.get("jti") not in self.jtis),
            ("ath", token is None or claims.get("ath") == _hash(token))] if not ok]
        if problems:
            self.refusals.append("proof " + ", ".join(problems))
            return None
        if nonce and claims.get("nonce") != NONCE:
            self.refusals.append("nonce")
            return None
        self.jtis.append(str(claims["jti"]))
        members = {k: header["jwk"][k] for k in ("crv", "kty", "x", "y")}
        digest = hashlib.sha256(json.dumps(members, separators=(",", ":"), sort_keys=True).encode()).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _hash(token: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(token.encode()).digest()).rstrip(b"=").decode()


def with_dpop(app: Any, checks: DpopChecks, base: str) -> Any:
    """`app` (the service-account server at `base`) with DPoP required."""

    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        path = scope["path"]
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        if path == "/.well-known/oauth-authorization-server":
            return await _amend_json(app, scope, receive, send,
                                     lambda body: {**body, "dpop_signing_alg_values_supported": ["ES256"]})
        if path == "/token":
            jkt = checks.check(headers.get("dpop"), "POST", f"{base}/token", token=None, nonce=checks.nonce_at_token)
            if jkt is None:
                nonce = checks.refusals[-1] == "nonce"
                return await _answer(send, 400, {"error": "use_dpop_nonce" if nonce else "invalid_dpop_proof"},
                                     [(b"dpop-nonce", NONCE.encode())] if nonce else [])

            key: str = jkt

            def bind(body: dict[str, Any]) -> dict[str, Any]:
                if "access_token" in body:
                    checks.bound[body["access_token"]] = key
                    return {**body, "token_type": "DPoP"}
                return body

            return await _amend_json(app, scope, receive, send, bind)
        if path == "/mcp" and "authorization" in headers:
            scheme, _, token = headers["authorization"].partition(" ")
            checks.schemes.append(scheme)
            if scheme != "DPoP" or token not in checks.bound:
                return await _answer(send, 401, {"error": "invalid_token"},
                                     [(b"www-authenticate", b'DPoP error="invalid_token"')])
            jkt = checks.check(headers.get("dpop"), scope["method"], f"{base}/mcp", token=token,
                               nonce=checks.nonce_at_mcp)
            if jkt != checks.bound[token]:
                nonce = checks.refusals[-1] == "nonce"
                challenge = b'DPoP error="use_dpop_nonce"' if nonce else b'DPoP error="invalid_dpop_proof"'
                return await _answer(send, 401, {"error": "use_dpop_nonce" if nonce else "invalid_dpop_proof"},
                                     [(b"www-authenticate", challenge)] + ([(b"dpop-nonce", NONCE.encode())]
                                                                          if nonce else []))
            scope = {**scope, "headers": [(k, v) for k, v in scope["headers"] if k.lower() != b"authorization"]
                     + [(b"authorization", f"Bearer {token}".encode())]}
        await app(scope, receive, send)

    return asgi


async def _answer(send: Any, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]]) -> None:
    content = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(content)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": content})


async def _amend_json(app: Any, scope: dict[str, Any], receive: Any, send: Any, amend: Any) -> None:
    """Run the inner app and change the JSON body it answers with."""
    start: dict[str, Any] = {}
    chunks: list[bytes] = []

    async def capture(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            start.update(message)
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                body = b"".join(chunks)
                with contextlib.suppress(ValueError):  # not JSON: passed on as it is
                    body = json.dumps(amend(json.loads(body))).encode()
                headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
                await send({**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})

    await app(scope, receive, capture)
