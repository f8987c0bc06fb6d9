"""A protected MCP server with its own authorization server, built from the SDK's auth server pieces.

`MCPServer(auth_server_provider=..., auth=AuthSettings(...))` serves protected-resource metadata, authorization-server
metadata, dynamic registration, /authorize, /token and /revoke from the SDK; `Provider` below is the in-memory
account store behind them. Its person consents at once (the test's "browser" only follows the redirect), unless the
test says they decline. With `login` on, /authorize first sends the browser to a login page (`/login?ticket=…`) where
the test says who is signing in (`&user=bob`), so several people get tokens of their own (`whoami` names them).
Tokens rotate on refresh; tests can revoke every refresh token, and count what was asked.
"""

from __future__ import annotations

import secrets
import socket
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from mcp.types import ElicitRequestFormParams, InputRequiredResult
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from bridge.cli.demo.server import ask
from tests.servers.serving import base_url

SCOPE = "mcp"


@dataclass
class Provider:
    """The authorization server's state: clients, codes, tokens, and what was asked of it."""

    access_ttl: int = 3600
    decline: bool = False
    """The person declines at the consent screen (the redirect carries error=access_denied)."""
    refuse_code: bool = False
    """The token endpoint refuses the authorization code (an `invalid_grant` answer, as for a code used twice)."""
    login: bool = False
    """Ask who signs in on a login page before redirecting back (several people, each their own account)."""
    base: str = ""
    tickets: dict[str, tuple[str, AuthorizationParams]] = field(default_factory=dict)
    revoked: list[str] = field(default_factory=list)
    """Tokens revoked through /revoke."""
    clients: dict[str, OAuthClientInformationFull] = field(default_factory=dict)
    codes: dict[str, AuthorizationCode] = field(default_factory=dict)
    access: dict[str, AccessToken] = field(default_factory=dict)
    refresh: dict[str, RefreshToken] = field(default_factory=dict)
    issued: list[str] = field(default_factory=list)
    """Every access and refresh token ever issued (to look for in files and output)."""
    counts: Counter[str] = field(default_factory=Counter)

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        self.counts["register"] += 1
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        self.counts["authorize"] += 1
        if self.decline:
            raise AuthorizeError("access_denied", "The person said no")
        assert client.client_id is not None
        if self.login:
            ticket = secrets.token_urlsafe(12)
            self.tickets[ticket] = (client.client_id, params)
            return f"{self.base}/login?ticket={ticket}"
        return self.redirect_with_code(client.client_id, params, "ada")

    def redirect_with_code(self, client_id: str, params: AuthorizationParams, subject: str) -> str:
        code = secrets.token_urlsafe(24)
        self.codes[code] = AuthorizationCode(
            code=code, scopes=params.scopes or [SCOPE], expires_at=time.time() + 300, client_id=client_id,
            code_challenge=params.code_challenge, redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly, resource=params.resource,
            subject=subject)
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client: OAuthClientInformationFull, code: str) -> AuthorizationCode | None:
        return self.codes.get(code)

    async def exchange_authorization_code(self, client: OAuthClientInformationFull,
                                          authorization_code: AuthorizationCode) -> OAuthToken:
        self.counts["code"] += 1
        if self.refuse_code:
            raise TokenError("invalid_grant", "The code has already been used")
        self.codes.pop(authorization_code.code, None)
        return self._issue(authorization_code.client_id, authorization_code.scopes, authorization_code.resource,
                           authorization_code.subject or "ada")

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        self.counts["refresh"] += 1  # every attempt, honoured or not
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(self, client: OAuthClientInformationFull, refresh_token: RefreshToken,
                                     scopes: list[str]) -> OAuthToken:
        if self.refresh.pop(refresh_token.token, None) is None:
            raise TokenError("invalid_grant", "refresh token revoked")
        return self._issue(refresh_token.client_id, scopes or refresh_token.scopes, refresh_token.resource,
                           refresh_token.subject or "ada")

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.revoked.append(token.token)
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    async def exchange_identity_assertion(self, client: OAuthClientInformationFull, params: Any) -> OAuthToken:
        raise TokenError("unsupported_grant_type")

    def revoke_refresh_tokens(self) -> None:
        self.refresh.clear()

    def expire_refresh_tokens(self) -> None:
        """Every refresh token is past its expiry (the SDK's token endpoint then answers invalid_grant)."""
        for token in self.refresh.values():
            token.expires_at = int(time.time()) - 1

    def expire_access_tokens(self) -> None:
        for token in self.access.values():
            token.expires_at = int(time.time()) - 1

    def _issue(self, client_id: str, scopes: list[str], resource: str | None, subject: str) -> OAuthToken:
        access, refresh = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        self.issued += [access, refresh]
        self.access[access] = AccessToken(token=access, client_id=client_id, scopes=scopes,
                                          expires_at=int(time.time()) + self.access_ttl, resource=resource,
                                          subject=subject)
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes, resource=resource,
                                             subject=subject)
        return OAuthToken(access_token=access, token_type="Bearer", expires_in=self.access_ttl,
                          refresh_token=refresh, scope=" ".join(scopes))


def protected_server(provider: Provider, sock: socket.socket) -> Any:
    """The ASGI app of a protected MCP server at `<base>/mcp`, its authorization server at `<base>`."""
    base = base_url(sock)
    server = MCPServer(
        "protected", auth_server_provider=provider,
        auth=AuthSettings(issuer_url=base, resource_server_url=f"{base}/mcp",  # type: ignore[arg-type]
                          client_registration_options=ClientRegistrationOptions(enabled=True,
                                                                                valid_scopes=[SCOPE, "extra"]),
                          revocation_options=RevocationOptions(enabled=True), required_scopes=[SCOPE],
                          validate_token_resource=True))

    provider.base = base

    @server.custom_route("/login", methods=["GET"])  # type: ignore[untyped-decorator]
    async def login(request: Request) -> Response:
        """The login page: the test's browser says who it is; the code issued is for that person."""
        ticket = provider.tickets.pop(request.query_params.get("ticket", ""), None)
        user = request.query_params.get("user", "")
        if ticket is None or not user:
            return PlainTextResponse("unknown ticket or no user", status_code=400)
        return RedirectResponse(provider.redirect_with_code(ticket[0], ticket[1], user), status_code=302)

    @server.tool()
    def whoami() -> str:
        """Who the bearer token belongs to."""
        token = get_access_token()
        return f"client {token.client_id} for {token.subject}" if token else "nobody"

    @server.tool()
    async def whoami_asking(ctx: Context) -> str | InputRequiredResult:
        """Ask for a word (a 2026 client gets input_required), then say it and whose token brought the answer."""
        answer = await ask(ctx, "word", ElicitRequestFormParams(message="Say a word", requested_schema={
            "type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}))
        if isinstance(answer, InputRequiredResult):
            return answer
        token = get_access_token()
        return f"{(answer.content or {}).get('word')} for {token.subject if token else 'nobody'}"

    return server.streamable_http_app()
