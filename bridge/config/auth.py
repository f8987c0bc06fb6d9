"""The config values of OAuth for url servers (`servers.<name>.auth`, `secrets_key_env`, `token_store`): the typed
block, how it is built from the file, and what it needs beyond its schema. `config.py` composes them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

Identity = Literal["shared", "per_user", "enterprise", "service", "none"]

PERSONAL: frozenset[str] = frozenset({"per_user", "enterprise"})
"""Identities that are each person's own account: tokens kept per person, sessions per person."""


@dataclass(frozen=True, slots=True)
class AuthConfig:
    """OAuth for a url server (`servers.<name>.auth`). Secrets are kept out of every repr."""

    identity: Identity = "shared"
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    token_endpoint_auth_method: Literal["client_secret_basic", "client_secret_post", "none"] | None = None
    private_key: str | None = field(default=None, repr=False)
    signing_algorithm: str = "RS256"
    issuer: str | None = None
    scopes: tuple[str, ...] = ()
    client_metadata_url: str | None = None
    client_name: str = "mcp-chat-bridge"
    redirect_uri: str | None = None
    key_env: str | None = None
    timeout: float = 600.0
    assertion_file: str | None = None
    """identity service: a file holding the workload's JWT (re-read at each token request), sent with the
    JWT-bearer grant instead of a client secret."""
    assertion_env: str | None = None
    """identity service: the environment variable holding the workload's JWT."""
    dpop: bool = True
    """Sender-constrained (DPoP) tokens where the authorization server offers them."""


OIDC_SCOPES = ("openid", "profile", "email", "offline_access")
"""offline_access brings the refresh token that keeps a company sign-in alive without asking again."""


@dataclass(frozen=True, slots=True)
class IdentityProviderConfig:
    """The company's OpenID Connect provider (`identity_provider`), where each person signs in once for every
    `enterprise` server. Secrets are kept out of every repr."""

    issuer: str
    client_id: str
    client_secret: str | None = field(default=None, repr=False)
    name: str = ""
    """What people are asked to sign in to (default: the issuer's host)."""
    scopes: tuple[str, ...] = OIDC_SCOPES
    redirect_uri: str | None = None
    id_token: str | None = field(default=None, repr=False)
    """An ID token obtained elsewhere (one person at a terminal): used instead of a sign-in."""
    timeout: float = 600.0

    def label(self) -> str:
        return self.name or (urlsplit(self.issuer).hostname or self.issuer)


def build_identity_provider(p: Mapping[str, Any] | None,
                            parse_duration: Callable[[Any], float]) -> IdentityProviderConfig | None:
    if not p:
        return None
    return IdentityProviderConfig(
        issuer=str(p["issuer"]), client_id=str(p["client_id"]), client_secret=p.get("client_secret"),
        name=str(p.get("name", "")), scopes=tuple(p.get("scopes") or OIDC_SCOPES),
        redirect_uri=p.get("redirect_uri"), id_token=p.get("id_token"),
        timeout=parse_duration(p.get("timeout", "10m")))


def default_token_store(store: str) -> str | None:
    """Beside the store: `./mcp-chat-bridge.db` keeps its tokens in `./mcp-chat-bridge.tokens.db`; a Postgres store
    keeps them itself (its `oauth_tokens` table), where every worker finds them."""
    if store == ":memory:":
        return None
    if store.startswith(("postgresql://", "postgres://")):
        return store
    if "://" in store:
        return "./mcp-chat-bridge.tokens.db"
    path = Path(store)
    return str(path.with_name(f"{path.stem}.tokens.db"))


def build_auth(a: Mapping[str, Any], parse_duration: Callable[[Any], float]) -> AuthConfig:
    return AuthConfig(
        identity=a.get("identity", "shared"), client_id=a.get("client_id"), client_secret=a.get("client_secret"),
        token_endpoint_auth_method=a.get("token_endpoint_auth_method"), private_key=a.get("private_key"),
        signing_algorithm=a.get("signing_algorithm", "RS256"), issuer=a.get("issuer"),
        scopes=tuple(a.get("scopes", ())), client_metadata_url=a.get("client_metadata_url"),
        client_name=a.get("client_name", "mcp-chat-bridge"), redirect_uri=a.get("redirect_uri"),
        key_env=a.get("key_env"), timeout=parse_duration(a.get("timeout", "10m")),
        assertion_file=a.get("assertion_file"), assertion_env=a.get("assertion_env"), dpop=a.get("dpop", True))


def auth_problems(where: str, server: Mapping[str, Any], data: Mapping[str, Any], env: Mapping[str, str]) -> list[str]:
    """What an `auth:` block needs beyond its schema (which checks its timeout); never quotes a value (it may be a
    secret)."""
    auth = server.get("auth")
    if not isinstance(auth, dict):
        return []
    problems: list[str] = []
    if server.get("command") and not server.get("url"):
        problems.append(f"{where}.auth: OAuth is for url servers; a stdio server gets its credentials from env")
    identity = auth.get("identity", "shared")
    if identity == "service" and not auth.get("client_id"):
        problems.append(f"{where}.auth: identity service needs client_id")
    credentials = [k for k in ("client_secret", "private_key", "assertion_file", "assertion_env") if auth.get(k)]
    if identity == "service" and not credentials:
        problems.append(f"{where}.auth: identity service needs client_secret, private_key, assertion_file or "
                        "assertion_env")
    if len(credentials) > 1:
        problems.append(f"{where}.auth: give {' or '.join(credentials)}, not "
                        f"{'both' if len(credentials) == 2 else 'several'}")
    if identity != "service" and (auth.get("assertion_file") or auth.get("assertion_env")):
        problems.append(f"{where}.auth: a workload token (assertion_file, assertion_env) is for identity service")
    if identity == "enterprise":
        if not data.get("identity_provider"):
            problems.append(f"{where}.auth: identity enterprise needs identity_provider (the company's OpenID "
                            "Connect provider, where each person signs in)")
        if not auth.get("client_id") or not auth.get("client_secret"):
            problems.append(f"{where}.auth: identity enterprise needs client_id and client_secret (the bridge's "
                            "client at the server's authorization server)")
        if auth.get("key_env") and not data.get("secrets_key_env"):
            problems.append(f"{where}.auth: the company sign-in is kept encrypted with the key named by "
                            "secrets_key_env (auth.key_env covers only this server's tokens): set secrets_key_env")
        if auth.get("token_endpoint_auth_method") == "none" or auth.get("private_key"):
            problems.append(f"{where}.auth: identity enterprise authenticates with client_secret "
                            "(client_secret_basic or client_secret_post)")
    if identity in PERSONAL:
        key_env = auth.get("key_env") or data.get("secrets_key_env")
        if not key_env:
            problems.append(f"{where}.auth: {identity} keeps each person's tokens, which must be encrypted: set "
                            "secrets_key_env (or auth.key_env) to the name of an environment variable holding a key")
        elif not env.get(key_env):
            problems.append(f"{where}.auth: {identity} needs the token encryption key, but the environment variable "
                            f"{key_env} is not set")
    return problems
