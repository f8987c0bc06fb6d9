"""Workload identity: `identity: service` with a JWT the platform gives the workload (a Kubernetes projected
service-account token, a cloud's workload identity token) instead of a client secret, presented with the JWT-bearer
grant (RFC 7523 §2.1, `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`, the JWT as `assertion`).

The assertion is read afresh for every token request, from `assertion_file` (the platform rotates the file in place)
or the environment variable `assertion_env`; it is never stored or logged.

The SDK has the JWT-bearer grant only for enterprise-managed authorization (`IdentityAssertionOAuthProvider`), which
needs a client secret and a configured issuer and skips protected-resource discovery; a workload has no secret, and its
authorization server is found like a service account's. So this is the SDK's client-credentials provider (discovery,
`issuer` pinning, resource indicator, scope) with only the grant of its token request replaced.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from urllib.parse import parse_qsl

import anyio
import httpx2
from mcp.client.auth import TokenStorage
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.shared.auth import JWT_BEARER_GRANT_TYPE, OAuthClientInformationFull

from bridge.config.auth import AuthConfig
from bridge.errors import AuthError

Assertion = Callable[[], Awaitable[str]]


def assertion_source(server: str, auth: AuthConfig, env: Mapping[str, str] | None = None) -> Assertion:
    """Where the workload's JWT is read from each time one is needed. Its errors name the place, never a value."""

    async def from_file() -> str:
        assert auth.assertion_file is not None
        try:
            text = await (await anyio.Path(auth.assertion_file).expanduser()).read_text("utf-8")
        except OSError as exc:
            raise AuthError(f"{server}: the workload token file {auth.assertion_file} cannot be read "
                            f"({exc.strerror or type(exc).__name__})") from None
        if not text.strip():
            raise AuthError(f"{server}: the workload token file {auth.assertion_file} is empty")
        return text.strip()

    async def from_env() -> str:
        assert auth.assertion_env is not None
        value = (os.environ if env is None else env).get(auth.assertion_env, "").strip()
        if not value:
            raise AuthError(f"{server}: the environment variable {auth.assertion_env} (the workload token) is not set")
        return value

    return from_file if auth.assertion_file else from_env


class WorkloadOAuthProvider(ClientCredentialsOAuthProvider):
    """A public client (no secret) that gets its token with the workload's JWT."""

    def __init__(self, server_url: str, storage: TokenStorage, client_id: str, assertion: Assertion,
                 scope: str | None = None, issuer: str | None = None) -> None:
        # The parent's secret and method are never used: the client record below replaces its own, and the token
        # request is built here.
        super().__init__(server_url, storage, client_id, client_secret="", scope=scope, issuer=issuer)
        self._fixed_client_info = OAuthClientInformationFull(
            redirect_uris=None, client_id=client_id, grant_types=[JWT_BEARER_GRANT_TYPE],
            token_endpoint_auth_method="none", scope=scope)
        self._assertion = assertion

    async def _exchange_token_client_credentials(self) -> httpx2.Request:
        # The parent's request carries what discovery decided (token endpoint of the pinned issuer, resource,
        # scope); only its grant changes.
        base = await super()._exchange_token_client_credentials()
        form = dict(parse_qsl(base.content.decode()))
        form.update(grant_type=JWT_BEARER_GRANT_TYPE, assertion=await self._assertion(),
                    client_id=self.context.client_info.client_id if self.context.client_info else "")
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        return httpx2.Request("POST", base.url, data=form, headers=headers)
