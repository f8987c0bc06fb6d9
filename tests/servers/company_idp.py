"""A small company identity provider for tests: OpenID Connect with token exchange issuing ID-JAGs (SEP-990).

It speaks the wire format of the real ones (Okta's cross-app access): discovery at
`/.well-known/openid-configuration`, `/authorize` (authorization code, PKCE S256 required) sending the browser to a
login page where the test says who signs in (`/login?ticket=…&user=ada`; someone the company has not assigned the
app to is refused with `access_denied`, as Okta does), and `/token` for the authorization code, the refresh token
and the RFC 8693 token exchange of an ID token for an ID-JAG (`typ: oauth-id-jag+jwt`, audience an authorization
server the company has set up, with that server's client id and the resource in its claims). Every JWT is signed
with PyJWT (ES256). The bridge is a confidential client (HTTP Basic).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import jwt
from cryptography.hazmat.primitives.asymmetric import ec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG_TYPE = "urn:ietf:params:oauth:token-type:id-jag"
CLIENT_ID, CLIENT_SECRET = "bridge-oidc-app", "bridge-oidc-secret"


@dataclass
class CompanyIdP:
    """The provider's state. `people`: who the app is assigned to; `apps`: audience (an MCP authorization server's
    issuer) -> the client id the bridge has there, for which ID-JAGs are issued."""

    people: set[str] = field(default_factory=lambda: {"ada", "bob"})
    apps: dict[str, str] = field(default_factory=dict)
    id_token_ttl: int = 3600
    issuer: str = ""
    key: ec.EllipticCurvePrivateKey = field(default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))
    tickets: dict[str, dict[str, str]] = field(default_factory=dict)
    codes: dict[str, dict[str, str]] = field(default_factory=dict)
    refresh: dict[str, str] = field(default_factory=dict)
    """refresh token -> person."""
    issued: list[str] = field(default_factory=list)
    """Every ID token, refresh token and ID-JAG issued (to look for in logs, chat and files)."""
    counts: Counter[str] = field(default_factory=Counter)
    exchanges: list[dict[str, str]] = field(default_factory=list)
    """The form of every token exchange (to check what the bridge sent)."""
    revoked: list[str] = field(default_factory=list)
    """Tokens revoked at /revoke."""
    rejected: set[str] = field(default_factory=set)
    """ID tokens the provider no longer takes in an exchange (their session was ended early)."""

    def public_pem(self) -> bytes:
        from cryptography.hazmat.primitives import serialization

        return self.key.public_key().public_bytes(serialization.Encoding.PEM,
                                                  serialization.PublicFormat.SubjectPublicKeyInfo)

    def sign(self, claims: dict[str, Any], typ: str = "JWT") -> str:
        token = jwt.encode(claims, self.key, algorithm="ES256", headers={"typ": typ, "kid": "k1"})
        self.issued.append(token)
        return token

    def id_token(self, person: str, nonce: str | None) -> str:
        now = int(time.time())
        claims = {"iss": self.issuer, "sub": f"00u-{person}", "aud": CLIENT_ID, "iat": now,
                  "exp": now + self.id_token_ttl, "email": f"{person}@example.com"}
        if nonce:
            claims["nonce"] = nonce
        return self.sign(claims)

    def tokens(self, person: str, nonce: str | None) -> dict[str, Any]:
        refresh = secrets.token_urlsafe(24)
        self.refresh[refresh] = person
        self.issued.append(refresh)
        return {"access_token": secrets.token_urlsafe(16), "token_type": "Bearer", "expires_in": self.id_token_ttl,
                "id_token": self.id_token(person, nonce), "refresh_token": refresh, "scope": "openid offline_access"}

    def revoke_sessions(self) -> None:
        """The company ended every session (refresh tokens no longer work)."""
        self.refresh.clear()


def _error(error: str, description: str = "", status: int = 400) -> JSONResponse:
    return JSONResponse({"error": error, "error_description": description}, status_code=status)


def company_app(idp: CompanyIdP) -> Starlette:
    async def discovery(request: Request) -> Response:
        base = idp.issuer
        return JSONResponse({
            "issuer": base, "authorization_endpoint": f"{base}/authorize", "token_endpoint": f"{base}/token",
            "jwks_uri": f"{base}/jwks.json", "response_types_supported": ["code"],
            "subject_types_supported": ["public"], "id_token_signing_alg_values_supported": ["ES256"],
            "grant_types_supported": ["authorization_code", "refresh_token", TOKEN_EXCHANGE],
            "code_challenge_methods_supported": ["S256"], "revocation_endpoint": f"{base}/revoke"})

    async def jwks(request: Request) -> Response:
        jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(idp.key.public_key()))
        return JSONResponse({"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "ES256"}]})

    async def authorize(request: Request) -> Response:
        idp.counts["authorize"] += 1
        q = dict(request.query_params)
        if q.get("client_id") != CLIENT_ID or q.get("response_type") != "code" or not q.get("redirect_uri"):
            return PlainTextResponse("bad authorization request", status_code=400)
        if q.get("code_challenge_method") != "S256" or not q.get("code_challenge"):
            return PlainTextResponse("PKCE (S256) is required", status_code=400)
        ticket = secrets.token_urlsafe(12)
        idp.tickets[ticket] = q
        return RedirectResponse(f"{idp.issuer}/login?ticket={ticket}", status_code=302)

    async def login(request: Request) -> Response:
        q = idp.tickets.pop(request.query_params.get("ticket", ""), None)
        user = request.query_params.get("user", "")
        if q is None or not user:
            return PlainTextResponse("unknown ticket or no user", status_code=400)
        back = {"state": q.get("state", ""), "iss": idp.issuer}
        if user not in idp.people:
            back |= {"error": "access_denied", "error_description": "User is not assigned to the client application."}
        else:
            code = secrets.token_urlsafe(24)
            idp.codes[code] = {**q, "user": user}
            back["code"] = code
        return RedirectResponse(f"{q['redirect_uri']}?{urlencode(back)}", status_code=302)

    async def token(request: Request) -> Response:
        form = {k: str(v) for k, v in (await request.form()).items()}
        basic = request.headers.get("authorization", "")
        if not basic.startswith("Basic ") or \
                base64.b64decode(basic[6:]).decode() != f"{CLIENT_ID}:{CLIENT_SECRET}":
            return _error("invalid_client", "client authentication failed", 401)
        grant = form.get("grant_type")
        if grant == "authorization_code":
            idp.counts["code"] += 1
            q = idp.codes.pop(form.get("code", ""), None)
            if q is None or q["redirect_uri"] != form.get("redirect_uri"):
                return _error("invalid_grant", "unknown code or another redirect_uri")
            verifier = form.get("code_verifier", "")
            challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
            if challenge != q["code_challenge"]:
                return _error("invalid_grant", "PKCE verification failed")
            return JSONResponse(idp.tokens(q["user"], q.get("nonce")))
        if grant == "refresh_token":
            idp.counts["refresh"] += 1
            person = idp.refresh.pop(form.get("refresh_token", ""), None)
            if person is None:
                return _error("invalid_grant", "refresh token is not valid")
            return JSONResponse(idp.tokens(person, None))
        if grant == TOKEN_EXCHANGE:
            idp.counts["exchange"] += 1
            idp.exchanges.append(form)
            return exchange(form)
        return _error("unsupported_grant_type")

    async def revoke(request: Request) -> Response:
        if request.headers.get("authorization", "") != "Basic " + base64.b64encode(
                f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode():
            return _error("invalid_client", "client authentication failed", 401)
        token = str((await request.form()).get("token", ""))
        idp.revoked.append(token)
        idp.refresh.pop(token, None)
        return Response(status_code=200)

    def exchange(form: dict[str, str]) -> Response:
        if form.get("requested_token_type") != ID_JAG_TYPE or form.get("subject_token_type") != ID_TOKEN_TYPE:
            return _error("invalid_request", "only ID tokens are exchanged, for ID-JAGs")
        try:
            subject = jwt.decode(form.get("subject_token", ""), idp.key.public_key(), algorithms=["ES256"],
                                 audience=CLIENT_ID, issuer=idp.issuer)
        except jwt.PyJWTError as exc:
            return _error("invalid_grant", f"the subject token is not valid: {type(exc).__name__}")
        if form.get("subject_token") in idp.rejected:
            return _error("invalid_grant", "the subject token's session has ended")
        audience, resource = form.get("audience", ""), form.get("resource", "")
        if audience not in idp.apps or not resource:
            return _error("invalid_target", "no cross-app access is set up for this audience")
        now = int(time.time())
        jag = idp.sign({"iss": idp.issuer, "sub": subject["sub"], "aud": audience, "client_id": idp.apps[audience],
                        "resource": resource, "jti": secrets.token_urlsafe(12), "iat": now, "exp": now + 300,
                        "email": subject.get("email")}, typ="oauth-id-jag+jwt")
        return JSONResponse({"access_token": jag, "issued_token_type": ID_JAG_TYPE, "token_type": "N_A",
                             "expires_in": 300})

    return Starlette(routes=[
        Route("/.well-known/openid-configuration", discovery), Route("/jwks.json", jwks),
        Route("/authorize", authorize), Route("/login", login), Route("/token", token, methods=["POST"]),
        Route("/revoke", revoke, methods=["POST"])])
