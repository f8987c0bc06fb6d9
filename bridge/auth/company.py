"""Company sign-in: the identity provider's half of enterprise-managed authorization (SEP-990).

Each person signs in once at the company's OpenID Connect provider (authorization code with PKCE, asked through the
same `Consent` as any per-person sign-in: a private Connect prompt in chat, a link at a terminal). Their ID token and
refresh token are kept sealed in the vault (slot: the provider's issuer, the person). For every `enterprise` server
the SDK's `IdentityAssertionOAuthProvider` asks `id_jag` for an Identity Assertion JWT Authorization Grant, which is
an RFC 8693 token exchange of the ID token at the provider (audience: the server's authorization server, resource:
the MCP server); the SDK then presents it there with the RFC 7523 JWT-bearer grant. An expired ID token is refreshed
with the refresh token; a refresh refused means a new sign-in. Nothing here ever logs or shows a token.

The SDK has no OpenID Connect client, so its requests (the authorization link; the code, the refresh and the exchange
at the token endpoint; revocation at logout) are written here over httpx, with the SDK's PKCE. The ID token's claims
are read with joserfc, its signature unchecked: it comes straight from the provider's token endpoint over TLS, which
OpenID Connect Core §3.1.3.7 accepts in place of the signature, and the bridge only hands it back to that provider.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol
from urllib.parse import urlencode

import anyio
import httpx2
from joserfc.errors import JoseError
from joserfc.jws import extract_compact
from mcp.client.auth.oauth2 import PKCEParameters
from mcp.shared.auth import AuthorizationCodeResult

from bridge.auth.signins import plain_oauth_error
from bridge.auth.tokens import TOKENS, TokenVault
from bridge.config.auth import AuthConfig, IdentityProviderConfig
from bridge.config.file import ServerConfig
from bridge.errors import AuthError, BridgeError
from bridge.text.plain import shorten

logger = logging.getLogger(__name__)

TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG_TYPE = "urn:ietf:params:oauth:token-type:id-jag"
TIMEOUT = 30.0
EARLY = 60.0
"""Seconds before its expiry an ID token is refreshed (the exchange must not race its end)."""


class Consent(Protocol):
    """How a person is asked to sign in (`bridge.auth.oauth.Consent`, which every consent implements)."""

    def redirect_uri(self, server: ServerConfig, registered: Sequence[str]) -> str: ...

    async def ask(self, server: ServerConfig, identity: str, authorization_url: str) -> AuthorizationCodeResult: ...

    def settle(self, state: str, error: str | None) -> None: ...


class CompanySignIn:
    """Each person's sign-in at the company's identity provider, shared by every `enterprise` server."""

    def __init__(self, provider: IdentityProviderConfig, vault: TokenVault, consent: Consent) -> None:
        self.provider = provider
        self._vault = vault
        self._consent = consent
        self._metadata: dict[str, Any] | None = None
        self._locks: dict[str, anyio.Lock] = {}
        # What a person is asked to sign in to: shown on the Connect prompt, with its redirect and time limit.
        self.place = ServerConfig(provider.label(), url=provider.issuer, auth=AuthConfig(
            identity="per_user", timeout=provider.timeout, redirect_uri=provider.redirect_uri))

    @property
    def slot(self) -> str:
        return self.provider.issuer

    async def id_jag(self, person: str, audience: str, resource: str, server: str) -> str:
        """An ID-JAG for `person` at the authorization server `audience`, for the MCP server `resource` (`server`:
        its name, for messages). Signs the person in first if needed."""
        async with self._locks.setdefault(person, anyio.Lock()):
            id_token = await self._id_token(person)
            answer = await self._exchange(id_token, audience, resource)
            if answer.get("error") == "invalid_grant" and self.provider.id_token is None:
                # The provider no longer takes this ID token (its session ended early): refresh, else sign in anew.
                await self._vault.put(self.slot, person, TOKENS, {**(await self._stored(person) or {}),
                                                                  "expires_at": 0})
                answer = await self._exchange(await self._id_token(person), audience, resource)
        if "error" in answer or not isinstance(answer.get("access_token"), str):
            why = plain_oauth_error(str(answer.get("error", "invalid_response")),
                                    str(answer.get("error_description", "")))
            raise AuthError(f"{self.provider.label()} did not grant access to {server}: {why}")
        if answer.get("issued_token_type", ID_JAG_TYPE) != ID_JAG_TYPE:
            raise AuthError(f"{self.provider.label()} answered the request for access to {server} with another kind "
                            "of token than an identity assertion (ID-JAG)")
        return str(answer["access_token"])

    async def signed_in(self, person: str) -> bool:
        return await self._stored(person) is not None

    async def forget(self, person: str) -> bool:
        """Forget the person's sign-in (a logout), revoking its refresh token where the provider offers revocation
        (RFC 7009; best effort, it is forgotten whatever the answer); True when there was one."""
        stored = await self._stored(person)
        await self._vault.forget(self.slot, person)
        if stored is not None and stored.get("refresh_token") and self.provider.id_token is None:
            await self._revoke(str(stored["refresh_token"]))
        return stored is not None

    async def _revoke(self, refresh_token: str) -> None:
        try:
            endpoint = (await self._discover()).get("revocation_endpoint")
            if isinstance(endpoint, str) and endpoint:
                await self._post(endpoint, {"token": refresh_token, "token_type_hint": "refresh_token"})
        except (AuthError, httpx2.HTTPError) as exc:
            logger.info("could not revoke a sign-in at %s: %s", self.provider.label(), type(exc).__name__)

    # -- the ID token: kept, refreshed, or a new sign-in ------------------------------------------------------------

    async def _id_token(self, person: str) -> str:
        if self.provider.id_token is not None:
            claims = _claims(self.provider.id_token)
            if float(claims.get("exp", 0)) <= time.time():
                raise AuthError(f"the ID token configured for {self.provider.label()} (identity_provider.id_token) "
                                "has expired; get a new one")
            return self.provider.id_token
        stored = await self._stored(person)
        if stored is not None and float(stored.get("expires_at") or 0) - EARLY > time.time():
            return str(stored["id_token"])
        if stored is not None and stored.get("refresh_token"):
            refreshed = await self._refresh(person, str(stored["refresh_token"]))
            if refreshed is not None:
                return refreshed
        return await self._sign_in(person)

    async def _stored(self, person: str) -> dict[str, Any] | None:
        return await self._vault.get(self.slot, person, TOKENS)

    async def _keep(self, person: str, answer: Mapping[str, Any], nonce: str | None,
                    previous_refresh: str | None = None) -> str:
        id_token = answer.get("id_token")
        if not isinstance(id_token, str):
            raise AuthError(f"{self.provider.label()} sent no ID token back (is `openid` among identity_provider."
                            "scopes?)")
        claims = self._check(id_token, nonce)
        refresh = answer.get("refresh_token") or previous_refresh
        await self._vault.put(self.slot, person, TOKENS, {
            "id_token": id_token, "refresh_token": refresh, "expires_at": float(claims["exp"]),
            "subject": str(claims.get("sub", ""))})
        return id_token

    def _check(self, id_token: str, nonce: str | None) -> dict[str, Any]:
        """The claims OpenID Connect Core §3.1.3.7 has a client check (the signature aside, see the module)."""
        claims = _claims(id_token)
        audience = claims.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        problem = ("it was issued by someone else" if claims.get("iss") != self.provider.issuer
                   else "it is for another client" if self.provider.client_id not in audiences
                   else "it has no expiry" if not isinstance(claims.get("exp"), int | float)
                   else "it has expired" if float(claims["exp"]) <= time.time()
                   else "it answers another sign-in" if nonce is not None and claims.get("nonce") != nonce
                   else None)
        if problem is not None:
            raise AuthError(f"the ID token {self.provider.label()} sent back is not valid: {problem}")
        return claims

    async def _refresh(self, person: str, refresh_token: str) -> str | None:
        answer = await self._token({"grant_type": "refresh_token", "refresh_token": refresh_token,
                                    "scope": " ".join(self.provider.scopes)})
        if "error" in answer:
            logger.info("the sign-in at %s could not be refreshed (%s); asking again", self.provider.label(),
                        shorten(str(answer["error"]), 60))
            return None
        return await self._keep(person, answer, None, previous_refresh=refresh_token)

    async def _sign_in(self, person: str) -> str:
        metadata = await self._discover()
        pkce = PKCEParameters.generate()
        state, nonce = secrets.token_urlsafe(32), secrets.token_urlsafe(16)
        configured = [self.provider.redirect_uri] if self.provider.redirect_uri else []
        redirect_uri = self._consent.redirect_uri(self.place, configured)
        query = {"response_type": "code", "client_id": self.provider.client_id, "redirect_uri": redirect_uri,
                 "scope": " ".join(self.provider.scopes), "state": state, "nonce": nonce,
                 "code_challenge": pkce.code_challenge, "code_challenge_method": "S256"}
        url = f"{metadata['authorization_endpoint']}?{urlencode(query)}"
        result = await self._consent.ask(self.place, person, url)
        error: str | None = "the sign-in did not finish"
        try:
            if result.state != state:
                raise AuthError(f"the sign-in to {self.provider.label()} came back for another sign-in; refused")
            if result.iss is not None and result.iss != self.provider.issuer:
                raise AuthError(f"the sign-in came back from {shorten(result.iss, 80)}, not {self.provider.label()}"
                                "; refused")
            answer = await self._token({"grant_type": "authorization_code", "code": result.code,
                                        "redirect_uri": redirect_uri, "code_verifier": pkce.code_verifier})
            if "error" in answer:
                raise AuthError(f"{self.provider.label()} refused the sign-in: "
                                f"{plain_oauth_error(str(answer['error']), str(answer.get('error_description', '')))}")
            id_token = await self._keep(person, answer, nonce)
            error = None
            return id_token
        except BridgeError as exc:
            error = str(exc)
            raise
        finally:
            self._consent.settle(state, error)

    # -- the provider's endpoints -----------------------------------------------------------------------------------

    async def _discover(self) -> dict[str, Any]:
        if self._metadata is None:
            url = self.provider.issuer.rstrip("/") + "/.well-known/openid-configuration"
            try:
                async with httpx2.AsyncClient(timeout=TIMEOUT) as http:
                    response = await http.get(url)
                metadata = response.json() if response.status_code == 200 else None
            except (httpx2.HTTPError, ValueError):
                metadata = None
            if not isinstance(metadata, dict) or not metadata.get("token_endpoint"):
                raise AuthError(f"{self.provider.label()} has no OpenID Connect configuration at {url}")
            if metadata.get("issuer") != self.provider.issuer:
                # OpenID Connect Discovery §4.3: a configuration for another issuer is not this provider's.
                raise AuthError(f"the OpenID Connect configuration at {url} is for another issuer; refused")
            self._metadata = metadata
        return self._metadata

    async def _exchange(self, id_token: str, audience: str, resource: str) -> dict[str, Any]:
        return await self._token({"grant_type": TOKEN_EXCHANGE, "requested_token_type": ID_JAG_TYPE,
                                  "subject_token": id_token, "subject_token_type": ID_TOKEN_TYPE,
                                  "audience": audience, "resource": resource})

    async def _token(self, form: dict[str, str]) -> dict[str, Any]:
        """A token endpoint request with the bridge's client authentication; the answer's JSON (an `error` member
        when refused). Raises AuthError when the provider cannot be reached or answers nonsense."""
        endpoint = str((await self._discover())["token_endpoint"])
        try:
            response = await self._post(endpoint, form)
            answer = response.json()
        except httpx2.HTTPError as exc:
            raise AuthError(f"{self.provider.label()} could not be reached ({type(exc).__name__})") from None
        except ValueError:
            answer = None
        if not isinstance(answer, dict) or (response.status_code != 200 and "error" not in answer):
            raise AuthError(f"{self.provider.label()}'s token endpoint answered {response.status_code} without an "
                            "OAuth answer")
        return answer


    async def _post(self, endpoint: str, form: dict[str, str]) -> httpx2.Response:
        """A form POST with the bridge's client authentication (HTTP Basic with a secret, else its client id)."""
        auth: httpx2.BasicAuth | None = None
        if self.provider.client_secret:
            auth = httpx2.BasicAuth(self.provider.client_id, self.provider.client_secret)
        else:
            form = {**form, "client_id": self.provider.client_id}
        async with httpx2.AsyncClient(timeout=TIMEOUT) as http:
            return await (http.post(endpoint, data=form, auth=auth) if auth is not None
                          else http.post(endpoint, data=form))


def _claims(token: str) -> dict[str, Any]:
    """The claims of a JWT, its signature unchecked (see the module)."""
    try:
        claims = json.loads(extract_compact(token.encode()).payload)
    except (JoseError, ValueError, UnicodeError):
        claims = None
    if not isinstance(claims, dict):
        raise AuthError("the ID token is not a readable JWT")
    return claims
