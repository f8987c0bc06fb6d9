"""OAuth for url servers, built on the SDK's client auth (`mcp.client.auth`): discovery of protected-resource and
authorization-server metadata (with issuer checks), PKCE, resource indicators, scope step-up, refresh, Client ID
Metadata Documents before dynamic registration, pre-registered clients, and client credentials for service accounts
all come from the SDK. This module only chooses the provider for a server's `auth:` block, keeps its tokens in the
vault, and routes the sign-in to a person through a `Consent`. A workload's token without a secret (the JWT-bearer
grant) is `bridge.auth.workload`; sender-constrained tokens (DPoP), which the SDK lacks, are `bridge.auth.dpop`, applied
to every request a provider's flow makes (`_Bridged.async_auth_flow`).

Three gaps of the SDK are filled here, each in one small override:
- tokens read back from storage get their expiry back (the SDK only tracks expiry for tokens it obtained in this
  process, so a token stored yesterday would be sent, refused, and a full sign-in asked for instead of a refresh);
- configured extra `scopes` are added to what the server asks for (the SDK replaces the requested scope with the
  server's challenge);
- how a sign-in ended is told to the `Consent` that asked for it (`Consent.settle`): the SDK exchanges the code only
  after the sign-in callback returned it, so the redirect's page and the Connect prompt learn from the provider
  whether tokens were stored (its storage says so) or the flow failed (in plain words, `bridge.auth.sdk_errors`).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import anyio
import httpx2
from mcp.client.auth import OAuthClientProvider, OAuthFlowError, TokenStorage
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.client.auth.extensions.identity_assertion import IdentityAssertionOAuthProvider
from mcp.client.auth.utils import (
    build_protected_resource_metadata_discovery_urls,
    create_oauth_metadata_request,
    extract_resource_metadata_from_www_auth,
    handle_protected_resource_response,
    union_scopes,
)
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from mcp.shared.auth_utils import check_resource_allowed
from mcp.shared.exceptions import MCPDeprecationWarning
from pydantic import AnyUrl, PrivateAttr

from bridge.auth.company import CompanySignIn
from bridge.auth.dpop import Dpop, InstallationKey
from bridge.auth.sdk_errors import plain_auth_error
from bridge.auth.tokens import Cipher, MemoryVault, SqliteVault, StoreVault, TokenVault, VaultStorage
from bridge.auth.workload import WorkloadOAuthProvider, assertion_source
from bridge.config.auth import PERSONAL, AuthConfig
from bridge.config.file import Config, ServerConfig
from bridge.errors import AuthError, ConfigError
from bridge.storage import is_postgres

logger = logging.getLogger(__name__)

SHARED = "shared"
PLACEHOLDER_REDIRECT = "http://127.0.0.1/callback"
"""Stands in until the provider's first request, when the consent picks the real redirect URI."""


class Consent(Protocol):
    """How a person is asked to sign in: show them the authorization URL, return what the redirect brought back."""

    def redirect_uri(self, server: ServerConfig, registered: Sequence[str]) -> str:
        """Where the redirect should come back; `registered` are the URIs a stored client was registered with (a
        loopback listener reuses one of their ports when it can, so an earlier registration stays usable)."""
        ...

    async def ask(self, server: ServerConfig, identity: str, authorization_url: str) -> AuthorizationCodeResult:
        """Raises AuthError when nobody signs in (refused, timed out, nobody to ask)."""
        ...

    def settle(self, state: str, error: str | None) -> None:
        """How the sign-in whose code `ask` returned ended: tokens stored (`error` None), or why not."""
        ...


class NoConsent:
    """For accounts nobody in chat signs in to (a shared account in the chat bridge): stored tokens are used and
    refreshed, and a server that needs a new sign-in is reported with the command an admin runs."""

    def __init__(self, config_path: str = "FILE") -> None:
        self._config_path = config_path

    def redirect_uri(self, server: ServerConfig, registered: Sequence[str]) -> str:
        return registered[0] if registered else PLACEHOLDER_REDIRECT

    async def ask(self, server: ServerConfig, identity: str, authorization_url: str) -> AuthorizationCodeResult:
        raise AuthError(f"{server.name} needs someone to sign in first: run `mcp-chat-bridge tools -c "
                        f"{self._config_path} {server.name}` in a terminal (with the token key set, so the "
                        "sign-in is kept)")

    def settle(self, state: str, error: str | None) -> None:
        pass  # it never hands out a code


def identity_for(server: ServerConfig, person: str | None) -> str | None:
    """Whose account a call uses: None for no OAuth at all. Fails closed for a per-person server and no person."""
    auth = server.auth
    if auth.identity == "none":
        return None
    if auth.identity == "service":
        return f"service:{auth.client_id}"
    if auth.identity in PERSONAL:
        if not person:
            raise AuthError(f"{server.name} uses each person's own account, and this request has no known person; "
                            "it was not sent")
        return person
    return SHARED


class _ScopedMetadata(OAuthClientMetadata):
    """Client metadata that always asks for the configured extra scopes too. At every sign-in the SDK replaces the
    requested scope with what the server's challenge names, then registers and authorizes with it; keeping the
    extras in on every assignment puts them in the registration as well as the authorization request."""

    _extra: str | None = PrivateAttr(default=None)

    @classmethod
    def of(cls, metadata: OAuthClientMetadata, extra: tuple[str, ...]) -> _ScopedMetadata:
        scoped = cls.model_validate(metadata.model_dump())
        scoped._extra = " ".join(extra) or None
        scoped.scope = metadata.scope
        return scoped

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "scope":
            value = union_scopes(value, self._extra)
        super().__setattr__(name, value)


class _Bridged(httpx2.Auth):
    """Mixed into every provider: a token loaded from storage keeps the expiry `VaultStorage` recomputed, the SDK's
    OAuth failures become an `AuthError` in plain words naming the server (`bridge.auth.sdk_errors`), a sign-in whose
    code the flow holds is told how it ended (`settled`), and with `dpop` every request of the flow goes with its
    DPoP proof (`bridge.auth.dpop`)."""

    server_name = "the server"
    settled: Callable[[str, str | None], None] | None = None
    """Told (state, error) once the code of a sign-in was exchanged and the tokens stored (error None), or not."""
    _holding: tuple[str, int] | None = None
    """The state of the sign-in whose code a flow holds, and that flow's task: the SDK's lock lets one flow at a time
    sign in, and only that one may report a failure (another request's flow may end while it waits for the lock)."""

    def __init__(self, *args: Any, dpop: Dpop | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._dpop = dpop

    def hold(self, state: str) -> None:
        """The sign-in callback gave this task's flow the code of the sign-in `state`."""
        self._holding = (state, anyio.get_current_task().id)

    def ended(self, error: str | None, *, in_flow: bool = False) -> None:
        """Report how the held sign-in ended (nothing is held: nothing to report)."""
        held = self._holding
        if held is None or (in_flow and held[1] != anyio.get_current_task().id):
            return
        self._holding = None
        if self.settled is not None:
            self.settled(held[0], error)

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        flow = super().async_auth_flow(request)
        dpop = self._dpop
        try:
            outgoing = await flow.__anext__()
            while True:
                main = outgoing is request
                # DPoP goes around the SDK's flow, on its requests and answers as they pass: the SDK has no DPoP, and
                # its token model refuses `token_type: DPoP` (bridge.auth.dpop says what is done).
                if dpop is not None:
                    await dpop.sign(outgoing, main=main)
                response = yield outgoing
                if dpop is not None:
                    if await dpop.wants_nonce(outgoing, response, main=main):
                        await dpop.sign(outgoing, main=main)
                        response = yield outgoing
                    response = await dpop.received(outgoing, response, main=main)
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        except OAuthFlowError as exc:
            error = plain_auth_error(self.server_name, exc)
            self.ended(str(error), in_flow=True)
            raise error from exc
        finally:
            # Anything else that ends the flow with a code held (the token endpoint unreachable, a cancellation).
            self.ended(f"signing in to {self.server_name} did not finish; run the call again", in_flow=True)
            await flow.aclose()

    async def _initialize(self) -> None:
        await super()._initialize()  # type: ignore[misc]
        context = self.context  # type: ignore[attr-defined]
        if context.current_tokens is not None and context.current_tokens.expires_in is not None:
            context.update_token_expiry(context.current_tokens)


class _UserProvider(_Bridged, OAuthClientProvider):
    """The authorization-code flow for a person (or the admin of a shared account)."""

    def __init__(self, *args: object, client_info: OAuthClientInformationFull | None, consent: Consent,
                 server: ServerConfig, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._fixed_client = client_info
        self._consent = consent
        self._server = server
        self._configured_redirect = server.auth.redirect_uri

    async def _initialize(self) -> None:
        await super()._initialize()
        if self._fixed_client is not None:
            self.context.client_info = self._fixed_client  # pre-registered: never replaced by a registration
        # The redirect URI is chosen now that the stored registration is known: a terminal's loopback listener
        # takes the port the client was registered with, so the authorization server accepts the redirect.
        info = self.context.client_info
        dynamic = info is not None and self._fixed_client is None and info.client_id != self.context.client_metadata_url
        registered = [self._configured_redirect] if self._configured_redirect else \
            [str(u) for u in (info.redirect_uris or [])] if info is not None and dynamic else []
        chosen = self._consent.redirect_uri(self._server, registered)
        uri = AnyUrl(chosen)
        self.context.client_metadata.redirect_uris = [uri]
        if self._fixed_client is not None:
            self._fixed_client.redirect_uris = [uri]
        if dynamic and chosen not in registered and self.context.current_tokens is None:
            # Registered for a redirect this process cannot receive (its port is taken, or it was registered where
            # nobody could sign in), and no tokens need that client to refresh: register again.
            self.context.client_info = None


class _ServiceSecretProvider(_Bridged, ClientCredentialsOAuthProvider):
    pass


class _ServiceKeyProvider(_Bridged, PrivateKeyJWTOAuthProvider):
    pass


class _EnterpriseProvider(_Bridged, IdentityAssertionOAuthProvider):
    """Enterprise-managed authorization: the SDK presents an ID-JAG from the company sign-in (`bridge.auth.company`)
    with the JWT-bearer grant. The SDK takes the authorization server as configuration; where `auth.issuer` is
    unset it is read, once, from the server's protected resource metadata (RFC 9728) before the SDK's flow runs.
    That lets the resource server name where the ID-JAG goes, but the identity provider decides which audiences
    it issues one for, so setting `issuer` pins it and is what the documentation recommends."""

    def __init__(self, storage: TokenStorage, client_id: str, client_secret: str, *, server_url: str,
                 issuer: str | None, **kwargs: Any) -> None:
        super().__init__(server_url, storage, client_id, client_secret, issuer or "http://unknown.invalid", **kwargs)
        self._server_url = server_url
        self._known = issuer is not None

    async def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        if not self._known:
            response = yield request
            if response.status_code not in (401, 403):
                return
            urls = build_protected_resource_metadata_discovery_urls(
                extract_resource_metadata_from_www_auth(response), self._server_url)
            for url in urls:
                prm = await handle_protected_resource_response((yield create_oauth_metadata_request(url)))
                # RFC 9728 §3.3: metadata naming another resource is not this server's.
                if prm is not None and prm.authorization_servers and check_resource_allowed(
                        requested_resource=self._resource, configured_resource=str(prm.resource)):
                    self._issuer = str(prm.authorization_servers[0])
                    self._client.issuer = self._issuer
                    self._known = True
                    break
            else:
                raise OAuthFlowError(f"{self.server_name} names no authorization server (set auth.issuer)")
        flow = super()._auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                response = yield outgoing
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        finally:
            await flow.aclose()


class _ServiceWorkloadProvider(_Bridged, WorkloadOAuthProvider):
    pass


@dataclass(frozen=True, slots=True)
class TokenPlace:
    """Where tokens for a config are kept: a file and the environment variable with its key (None: in memory)."""

    path: str | None
    key_env: str | None


def token_place(config: Config, server: ServerConfig) -> TokenPlace:
    key_env = server.auth.key_env or config.secrets_key_env
    return TokenPlace(config.token_store if key_env else None, key_env)


class OAuthClients:
    """One httpx auth per (server URL, identity), shared by every session using that account, so a refresh by one
    session is seen by the others (a refresh token may be single-use)."""

    def __init__(self, config: Config, consent: Consent, env: Mapping[str, str] | None = None) -> None:
        self._config = config
        self.consent = consent
        self._env = env
        self._vaults: dict[TokenPlace, TokenVault] = {}
        self._memory = MemoryVault()
        self._providers: dict[tuple[str, str], _Bridged] = {}
        self._dpop_keys: dict[TokenPlace, InstallationKey] = {}
        self._company: CompanySignIn | None = None

    def company(self) -> CompanySignIn:
        """The company sign-in (`identity_provider`), kept in the vault of `secrets_key_env`."""
        provider = self._config.identity_provider
        if provider is None:
            raise ConfigError(["identity_provider: enterprise servers need the company's identity provider"])
        if self._company is None:
            place = TokenPlace(self._config.token_store if self._config.secrets_key_env else None,
                               self._config.secrets_key_env)
            self._company = CompanySignIn(provider, self._vault_at(place, personal=True), self.consent)
        return self._company

    def vault(self, server: ServerConfig) -> TokenVault:
        place = token_place(self._config, server)
        if (place.path is None or place.key_env is None) and server.auth.identity in PERSONAL:
            raise ConfigError([f"servers.{server.name}.auth: {server.auth.identity} needs secrets_key_env and a "
                               "token store"])
        return self._vault_at(place, personal=server.auth.identity in PERSONAL)

    def _vault_at(self, place: TokenPlace, *, personal: bool) -> TokenVault:
        if place.path is None or place.key_env is None:
            if personal:
                raise ConfigError(["secrets_key_env: each person's sign-in is kept encrypted; set secrets_key_env "
                                   "and a token store"])
            return self._memory
        if place not in self._vaults:
            cipher = Cipher.from_env(place.key_env, self._env)
            # A Postgres store keeps the tokens itself: every worker on it signs in once and refreshes the same ones.
            self._vaults[place] = StoreVault(place.path, cipher) if is_postgres(place.path) \
                else SqliteVault(Path(place.path).expanduser(), cipher)
        return self._vaults[place]

    async def aclose(self) -> None:
        vaults, self._vaults = list(self._vaults.values()), {}
        for vault in vaults:
            if isinstance(vault, SqliteVault):
                vault.close()
            elif isinstance(vault, StoreVault):
                await vault.aclose()

    def for_server(self, server: ServerConfig, person: str | None = None) -> httpx2.Auth | None:
        """The auth to put on the server's HTTP client, or None when the server is configured without OAuth."""
        if not server.url:
            return None
        identity = identity_for(server, person)
        if identity is None:
            return None
        key = (server.url, identity)
        if key not in self._providers:
            provider = self._build(server, identity)
            provider.server_name = server.name
            if not isinstance(provider, _EnterpriseProvider):
                context = provider.context  # type: ignore[attr-defined]
                context.client_metadata = _ScopedMetadata.of(context.client_metadata, server.auth.scopes)
            self._providers[key] = provider
        return self._providers[key]

    def forget(self, server: ServerConfig, identity: str) -> None:
        """Drop the provider of an account (logged out): the next use starts from what the vault holds."""
        if server.url:
            self._providers.pop((server.url, identity), None)

    def _dpop(self, server: ServerConfig, identity: str) -> Dpop | None:
        """DPoP for this account, with the installation key of the vault its tokens are in (None: `dpop: false`)."""
        if not server.auth.dpop or server.url is None:
            return None
        vault = self.vault(server)
        key = self._dpop_keys.setdefault(token_place(self._config, server), InstallationKey(vault))
        return Dpop(key, vault, server.url, identity)

    def _build(self, server: ServerConfig, identity: str) -> _Bridged:
        assert server.url is not None
        auth = server.auth
        storage = VaultStorage(self.vault(server), server.url, identity)
        dpop = self._dpop(server, identity)
        scope = " ".join(auth.scopes) or None
        if auth.identity == "service":
            assert auth.client_id is not None
            with warnings.catch_warnings():
                # Without `issuer` the SDK warns that the server decides where the credentials go; the README
                # recommends setting it, and the warning is not for the person running a command.
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                if auth.assertion_file or auth.assertion_env:
                    return _ServiceWorkloadProvider(server.url, storage, auth.client_id,
                                                    assertion_source(server.name, auth, self._env), scope=scope,
                                                    issuer=auth.issuer, dpop=dpop)
                if auth.private_key:
                    signer = SignedJWTParameters(issuer=auth.client_id, subject=auth.client_id,
                                                 signing_key=auth.private_key,
                                                 signing_algorithm=auth.signing_algorithm)
                    return _ServiceKeyProvider(server.url, storage, auth.client_id, signer.create_assertion_provider(),
                                               scope=scope, issuer=auth.issuer, dpop=dpop)
                assert auth.client_secret is not None
                method = auth.token_endpoint_auth_method
                return _ServiceSecretProvider(
                    server.url, storage, auth.client_id, auth.client_secret,
                    token_endpoint_auth_method="client_secret_post" if method == "client_secret_post"
                    else "client_secret_basic", scope=scope, issuer=auth.issuer, dpop=dpop)
        if auth.identity == "enterprise":
            return self._enterprise_provider(server, identity, storage, scope)
        return self._user_provider(server, identity, storage, dpop)

    def _enterprise_provider(self, server: ServerConfig, person: str, storage: VaultStorage,
                             scope: str | None) -> _Bridged:
        assert server.url is not None and server.auth.client_id and server.auth.client_secret
        company = self.company()
        name = server.name

        async def assertion(audience: str, resource: str) -> str:
            return await company.id_jag(person, audience, resource, name)

        method = server.auth.token_endpoint_auth_method
        return _EnterpriseProvider(storage, server.auth.client_id, server.auth.client_secret,
                                   server_url=server.url, issuer=server.auth.issuer, assertion_provider=assertion,
                                   scope=scope, token_endpoint_auth_method="client_secret_post"
                                   if method == "client_secret_post" else "client_secret_basic")

    def _user_provider(self, server: ServerConfig, identity: str, storage: VaultStorage,
                       dpop: Dpop | None) -> _Bridged:
        assert server.url is not None
        auth = server.auth
        metadata = OAuthClientMetadata(client_name=auth.client_name, redirect_uris=[AnyUrl(PLACEHOLDER_REDIRECT)],
                                       grant_types=["authorization_code", "refresh_token"], response_types=["code"])
        pending: list[str] = []

        async def redirect_handler(authorization_url: str) -> None:
            pending.append(authorization_url)

        async def callback_handler() -> AuthorizationCodeResult:
            result = await self.consent.ask(server, identity, pending.pop())
            if result.state:
                provider.hold(result.state)
            return result

        provider = _UserProvider(server.url, metadata, _Reporting(storage, lambda: provider.ended(None)),
                                 redirect_handler, callback_handler,
                                 client_metadata_url=None if auth.client_id else auth.client_metadata_url,
                                 client_info=_registered(auth), consent=self.consent, server=server, dpop=dpop)
        provider.settled = self.consent.settle
        return provider


class _Reporting:
    """A provider's token storage: tokens stored while the provider holds a sign-in's code are that sign-in's
    (the SDK stores them right after exchanging the code), so storing them tells it that it worked (`stored`)."""

    def __init__(self, inner: TokenStorage, stored: Callable[[], None]) -> None:
        self._inner = inner
        self._stored = stored

    async def get_tokens(self) -> OAuthToken | None:
        return await self._inner.get_tokens()

    async def set_tokens(self, tokens: OAuthToken) -> None:
        await self._inner.set_tokens(tokens)
        self._stored()

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return await self._inner.get_client_info()

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        await self._inner.set_client_info(client_info)


def _registered(auth: AuthConfig) -> OAuthClientInformationFull | None:
    """A client registered in advance (client_id in the config), or None to register dynamically."""
    if not auth.client_id:
        return None
    method = auth.token_endpoint_auth_method or ("client_secret_basic" if auth.client_secret else "none")
    return OAuthClientInformationFull(client_id=auth.client_id, client_secret=auth.client_secret,
                                      redirect_uris=[AnyUrl(auth.redirect_uri or PLACEHOLDER_REDIRECT)],
                                      grant_types=["authorization_code", "refresh_token"],
                                      token_endpoint_auth_method=method)
