"""A protected MCP server whose authorization server issues tokens to service accounts (`client_credentials`).

The SDK's authorization-server pieces have no `client_credentials` grant, so the token endpoint here is a small one:
it authenticates the client by its secret (HTTP Basic or in the form) or by a private-key JWT (RFC 7523, checked with
PyJWT against the account's public key, audience the issuer), and issues a bearer token bound to the `resource` the
client asked for. The MCP server itself is the SDK's `MCPServer` as a resource server (protected-resource metadata,
bearer checks, the token's resource checked). `whoami` names the account the token belongs to.
"""

from __future__ import annotations

import base64
import secrets
import socket
import time
from dataclasses import dataclass, field
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from tests.servers.serving import base_url

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"


def key_pair() -> tuple[str, str]:
    """A fresh P-256 key pair as PEM: (private key for the bridge's config, public key for the server)."""
    key = ec.generate_private_key(ec.SECP256R1())
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return private, public


@dataclass
class Accounts:
    """The authorization server's service accounts and what it issued."""

    secrets: dict[str, str] = field(default_factory=dict)
    """client_id → client secret."""
    keys: dict[str, str] = field(default_factory=dict)
    """client_id → public key (PEM) its private-key JWTs are checked with."""
    issuer: str = ""
    access: dict[str, AccessToken] = field(default_factory=dict)
    methods: list[str] = field(default_factory=list)
    """How each token request authenticated (client_secret_basic, client_secret_post, private_key_jwt, jwt-bearer)."""
    workload_issuer_key: str | None = None
    """The public key (PEM) of the platform that signs workloads' JWTs (the JWT-bearer grant, RFC 7523 §2.1)."""
    workload_jtis: list[str] = field(default_factory=list)
    """The jti of each workload JWT presented, in order."""

    async def verify_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        return found if found is not None and (found.expires_at or 0) > time.time() else None

    def authenticate(self, request: Request, form: FormData) -> str | None:
        """The client the request proves to be, or None."""
        header = request.headers.get("authorization", "")
        if header.lower().startswith("basic "):
            client_id, _, secret = base64.b64decode(header[6:]).decode().partition(":")
            self.methods.append("client_secret_basic")
            return client_id if self._secret_matches(client_id, secret) else None
        if form.get("client_assertion_type") == ASSERTION_TYPE:
            self.methods.append("private_key_jwt")
            return self._assertion_subject(str(form.get("client_assertion", "")))
        client_id, secret = str(form.get("client_id", "")), str(form.get("client_secret", ""))
        self.methods.append("client_secret_post")
        return client_id if self._secret_matches(client_id, secret) else None

    def _secret_matches(self, client_id: str, secret: str) -> bool:
        expected = self.secrets.get(client_id)
        return expected is not None and secrets.compare_digest(expected, secret)

    def _assertion_subject(self, assertion: str) -> str | None:
        try:
            claims = jwt.decode(assertion, options={"verify_signature": False})
            key = self.keys.get(str(claims.get("sub")))
            if key is None or claims.get("iss") != claims.get("sub"):
                return None
            checked = jwt.decode(assertion, key, algorithms=["ES256"], audience=self.issuer,
                                 options={"require": ["exp", "iat", "jti"]})
        except jwt.PyJWTError:
            return None
        return str(checked["sub"])

    def workload(self, assertion: str) -> str | None:
        """The workload a JWT-bearer grant's assertion proves (its subject), or None."""
        if self.workload_issuer_key is None:
            return None
        try:
            checked = jwt.decode(assertion, self.workload_issuer_key, algorithms=["ES256"], audience=self.issuer,
                                 options={"require": ["exp", "sub", "jti"]})
        except jwt.PyJWTError:
            return None
        self.methods.append("jwt-bearer")
        self.workload_jtis.append(str(checked["jti"]))
        return str(checked["sub"])

    def issue(self, client_id: str, resource: str | None) -> dict[str, Any]:
        token = secrets.token_urlsafe(32)
        self.access[token] = AccessToken(token=token, client_id=client_id, scopes=["mcp"],
                                         expires_at=int(time.time()) + 3600, resource=resource, subject=client_id)
        return {"access_token": token, "token_type": "Bearer", "expires_in": 3600, "scope": "mcp"}


def service_server(accounts: Accounts, sock: socket.socket) -> Any:
    """The ASGI app: the MCP server at `<base>/mcp`, its authorization server (issuer `<base>`) beside it."""
    base = base_url(sock)
    accounts.issuer = base
    server = MCPServer("service", token_verifier=accounts,
                       auth=AuthSettings(issuer_url=base, resource_server_url=f"{base}/mcp",  # type: ignore[arg-type]
                                         required_scopes=["mcp"], validate_token_resource=True))

    @server.custom_route("/.well-known/oauth-authorization-server", methods=["GET"])  # type: ignore[untyped-decorator]
    async def metadata(request: Request) -> Response:
        return JSONResponse({
            "issuer": base, "token_endpoint": f"{base}/token", "authorization_endpoint": f"{base}/authorize",
            "response_types_supported": ["code"], "grant_types_supported": ["client_credentials", JWT_BEARER],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post", "private_key_jwt"],
            "token_endpoint_auth_signing_alg_values_supported": ["ES256"]})

    @server.custom_route("/token", methods=["POST"])  # type: ignore[untyped-decorator]
    async def token(request: Request) -> Response:
        form = await request.form()
        if form.get("grant_type") == JWT_BEARER:
            if form.get("client_secret") or request.headers.get("authorization"):
                return JSONResponse({"error": "invalid_request", "error_description": "a workload sends no secret"},
                                    status_code=400)
            subject = accounts.workload(str(form.get("assertion", "")))
            if subject is None:
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            resource = form.get("resource")
            return JSONResponse(accounts.issue(subject, str(resource) if resource else None))
        if form.get("grant_type") != "client_credentials":
            return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)
        client_id = accounts.authenticate(request, form)
        if client_id is None:
            return JSONResponse({"error": "invalid_client", "error_description": "Unknown client or wrong credentials"},
                                status_code=401)
        resource = form.get("resource")
        return JSONResponse(accounts.issue(client_id, str(resource) if resource else None),
                            headers={"Cache-Control": "no-store"})

    @server.tool()
    def whoami() -> str:
        """Who the bearer token belongs to."""
        found = get_access_token()
        return f"client {found.client_id} for {found.subject}" if found else "nobody"

    return server.streamable_http_app()
