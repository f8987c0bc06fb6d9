"""Protected MCP servers that take enterprise-managed authorization: the SDK's authorization server pieces with the
JWT-bearer grant on (`identity_assertion_enabled`), accepting an ID-JAG from the test's company identity provider
(`tests/servers/company_idp.py`) and nothing else: no consent screen, no registration, one pre-registered
confidential client. The ID-JAG is checked as SEP-990 §5.1 says (signature, issuer, audience, `typ`, client id,
resource, expiry, replay), and the access token issued is the person's (`whoami` names them by email).

`company(tmp_path, monkeypatch)` runs the whole company: the identity provider and two such servers.
"""

from __future__ import annotations

import base64
import secrets
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jwt
import pytest
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import IdentityAssertionParams, TokenError
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import JWT_BEARER_GRANT_TYPE, OAuthClientInformationFull, OAuthToken

from bridge.config.auth import AuthConfig, IdentityProviderConfig
from bridge.config.file import ServerConfig
from tests.servers.company_idp import CLIENT_ID, CLIENT_SECRET, CompanyIdP, company_app
from tests.servers.oauth import SCOPE, Provider
from tests.servers.serving import base_url, bound_socket, serve

KEY_ENV = "TEST_COMPANY_KEY"


@dataclass
class JagProvider(Provider):
    """An authorization server that issues tokens for ID-JAGs from `idp` only."""

    idp: CompanyIdP = field(default_factory=CompanyIdP)
    client_id: str = ""
    seen: set[str] = field(default_factory=set)
    """jti of every ID-JAG taken (a replay is refused)."""

    async def exchange_identity_assertion(self, client: OAuthClientInformationFull,
                                          params: IdentityAssertionParams) -> OAuthToken:
        self.counts["jwt-bearer"] += 1
        try:
            if jwt.get_unverified_header(params.assertion).get("typ") != "oauth-id-jag+jwt":
                raise TokenError("invalid_grant", "not an ID-JAG")
            claims = jwt.decode(params.assertion, self.idp.key.public_key(), algorithms=["ES256"],
                                audience=self.base, issuer=self.idp.issuer, options={"require": ["exp", "sub", "jti"]})
        except jwt.PyJWTError as exc:
            raise TokenError("invalid_grant", f"the ID-JAG is not valid: {type(exc).__name__}") from None
        if claims.get("client_id") != client.client_id or claims.get("resource") != f"{self.base}/mcp":
            raise TokenError("invalid_grant", "the ID-JAG is for another client or resource")
        if claims["jti"] in self.seen:
            raise TokenError("invalid_grant", "the ID-JAG was already used")
        self.seen.add(claims["jti"])
        assert client.client_id is not None
        token = self._issue(client.client_id, [SCOPE], claims["resource"], str(claims.get("email") or claims["sub"]))
        return OAuthToken(access_token=token.access_token, token_type="Bearer", expires_in=token.expires_in,
                          scope=token.scope)  # no refresh token: a new ID-JAG is the way to a new token


def enterprise_server(provider: JagProvider, sock: socket.socket) -> Any:
    base = base_url(sock)
    provider.base = base
    provider.client_id = f"bridge-at-{sock.getsockname()[1]}"
    provider.clients[provider.client_id] = OAuthClientInformationFull(
        client_id=provider.client_id, client_secret="as-secret", redirect_uris=None,
        grant_types=[JWT_BEARER_GRANT_TYPE], token_endpoint_auth_method="client_secret_basic")
    provider.idp.apps[base] = provider.client_id
    server = MCPServer(
        "enterprise", auth_server_provider=provider,
        auth=AuthSettings(issuer_url=base, resource_server_url=f"{base}/mcp",  # type: ignore[arg-type]
                          required_scopes=[SCOPE], validate_token_resource=True, identity_assertion_enabled=True))

    @server.tool()
    def whoami() -> str:
        """Who the bearer token belongs to."""
        token = get_access_token()
        return f"{token.subject}" if token else "nobody"

    return server.streamable_http_app()


@dataclass
class Company:
    idp: CompanyIdP
    servers: dict[str, JagProvider]
    """name -> its authorization server."""
    urls: dict[str, str]
    tokens: Path

    def identity_provider(self, **kw: Any) -> IdentityProviderConfig:
        return IdentityProviderConfig(issuer=self.idp.issuer, client_id=CLIENT_ID, client_secret=CLIENT_SECRET,
                                      name="Acme SSO", **kw)

    def server(self, name: str, *, issuer: bool = True) -> ServerConfig:
        provider = self.servers[name]
        return ServerConfig(name, url=self.urls[name], auth=AuthConfig(
            identity="enterprise", client_id=provider.client_id, client_secret="as-secret",
            issuer=provider.base if issuer else None))

    def settings(self) -> dict[str, Any]:
        """The Config fields of the company sign-in (tokens encrypted with the key in KEY_ENV)."""
        return {"secrets_key_env": KEY_ENV, "token_store": str(self.tokens),
                "identity_provider": self.identity_provider()}

    def server_configs(self) -> dict[str, ServerConfig]:
        return {name: self.server(name) for name in self.servers}

    def issued(self) -> list[str]:
        """Every secret the company handed out: ID tokens, refresh tokens, ID-JAGs, access tokens."""
        return [*self.idp.issued, *(t for p in self.servers.values() for t in p.issued)]


@contextmanager
def company(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, names: tuple[str, ...] = ("crm", "wiki")) \
        -> Iterator[Company]:
    monkeypatch.setenv(KEY_ENV, base64.b64encode(secrets.token_bytes(32)).decode())
    idp = CompanyIdP()
    idp_sock = bound_socket()
    idp.issuer = base_url(idp_sock)
    socks = {name: bound_socket() for name in names}
    providers = {name: JagProvider(idp=idp) for name in names}
    with serve(company_app(idp), idp_sock), \
            _serving({n: enterprise_server(providers[n], socks[n]) for n in names}, socks) as urls:
        yield Company(idp, providers, urls, tmp_path / "tokens.db")


@contextmanager
def _serving(apps: dict[str, Any], socks: dict[str, socket.socket]) -> Iterator[dict[str, str]]:
    if not apps:
        yield {}
        return
    name = next(iter(apps))
    with serve(apps[name], socks[name]) as base:
        rest = {n: a for n, a in apps.items() if n != name}
        with _serving(rest, socks) as urls:
            yield {name: f"{base}/mcp", **urls}
