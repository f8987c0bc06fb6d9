"""`auth:` in the config, whose account a call uses, and which provider and token store a server gets."""

from __future__ import annotations

import base64
import secrets
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider, PrivateKeyJWTOAuthProvider

from bridge.auth.oauth import NoConsent, OAuthClients, identity_for
from bridge.auth.tokens import MemoryVault, SqliteVault
from bridge.auth.workload import WorkloadOAuthProvider
from bridge.cli import preflight
from bridge.config.file import Config, from_mapping
from bridge.errors import AuthError, ConfigError

KEY = base64.b64encode(secrets.token_bytes(32)).decode()


def config(auth: dict[str, Any], env: dict[str, str] | None = None, **top: Any) -> Config:
    return from_mapping({**top, "servers": {"s": {"url": "https://mcp.example.com/mcp", "auth": auth}}},
                        env if env is not None else {})


def problems(raw: dict[str, Any], env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        from_mapping(raw, env or {})
    return exc.value.problems


def test_per_user_servers_refuse_to_load_without_a_token_key() -> None:
    assert problems({"servers": {"s": {"url": "https://a/mcp", "auth": {"identity": "per_user"}}}}) == [
        "servers.s.auth: per_user keeps each person's tokens, which must be encrypted: set secrets_key_env (or "
        "auth.key_env) to the name of an environment variable holding a key"]
    assert problems({"secrets_key_env": "BRIDGE_KEY",
                     "servers": {"s": {"url": "https://a/mcp", "auth": {"identity": "per_user"}}}}) == [
        "servers.s.auth: per_user needs the token encryption key, but the environment variable BRIDGE_KEY is not set"]
    loaded = config({"identity": "per_user", "key_env": "MY_KEY"}, {"MY_KEY": KEY})
    assert loaded.servers["s"].auth.identity == "per_user"


def test_auth_problems_are_named_and_never_quote_a_secret() -> None:
    found = problems({"servers": {
        "a": {"url": "https://a/mcp", "auth": {"identity": "service", "client_secret": "s3cr3t-value"}},
        "b": {"url": "https://b/mcp", "auth": {"identity": "service", "client_id": "c"}},
        "c": {"command": "srv", "auth": {}},
        "d": {"url": "https://d/mcp", "auth": {"client_id": "c", "client_secret": "x", "private_key": "k"}},
        "e": {"url": "https://e/mcp", "auth": {"identity": "everyone", "client_metadata_url": "http://x/cimd"}},
        "f": {"url": "https://f/mcp", "auth": {"identity": "service", "client_id": "w", "assertion_file": "/t",
                                                "assertion_env": "T"}},
        "g": {"url": "https://g/mcp", "auth": {"identity": "shared", "assertion_env": "T"}},
        "h": {"url": "https://h/mcp", "auth": {"identity": "service", "client_id": "w", "assertion_env": "T"}},
    }})
    assert "servers.a.auth: identity service needs client_id" in found
    assert "servers.b.auth: identity service needs client_secret, private_key, assertion_file or assertion_env" \
        in found
    assert "servers.c.auth: OAuth is for url servers; a stdio server gets its credentials from env" in found
    assert "servers.d.auth: give client_secret or private_key, not both" in found
    assert "servers.f.auth: give assertion_file or assertion_env, not both" in found
    assert "servers.g.auth: a workload token (assertion_file, assertion_env) is for identity service" in found
    assert not any(p.startswith("servers.h.") for p in found)
    assert "servers.e.auth.identity: must be one of shared, per_user, enterprise, service, none" in found
    assert "servers.e.auth.client_metadata_url: does not match the pattern ^https://[^/]+/." in found
    assert not any("s3cr3t" in p for p in found)


def test_secrets_stay_out_of_reprs_and_the_token_store_sits_beside_the_store() -> None:
    loaded = config({"identity": "service", "client_id": "svc", "client_secret": "s3cr3t-value", "scopes": ["a"],
                     "timeout": "2m"}, store="/var/lib/bridge/main.db")
    auth = loaded.servers["s"].auth
    assert "s3cr3t" not in repr(loaded) and auth.client_secret == "s3cr3t-value"
    assert auth.scopes == ("a",) and auth.timeout == 120.0
    assert loaded.token_store == "/var/lib/bridge/main.tokens.db"
    assert config({}, store=":memory:").token_store is None
    assert config({}, token_store="/x/t.db").token_store == "/x/t.db"


def test_whose_account_a_call_uses() -> None:
    def server(**auth: Any) -> Any:
        return config(auth).servers["s"]

    assert identity_for(server(), "slack:U1") == "shared"
    assert identity_for(server(identity="none"), "slack:U1") is None
    assert identity_for(server(identity="service", client_id="svc", client_secret="x"), None) == "service:svc"
    per_user = config({"identity": "per_user"}, {"K": KEY}, secrets_key_env="K").servers["s"]
    assert identity_for(per_user, "slack:U1") == "slack:U1"
    with pytest.raises(AuthError, match="has no known person; it was not sent"):
        identity_for(per_user, None)


def test_one_provider_per_account_and_the_right_kind(tmp_path: Path) -> None:
    env = {"K": KEY}
    loaded = config({"identity": "per_user"}, env, secrets_key_env="K", token_store=str(tmp_path / "t.db"))
    clients = OAuthClients(loaded, NoConsent(), env)
    try:
        server = loaded.servers["s"]
        ada = clients.for_server(server, "slack:U1")
        assert isinstance(ada, OAuthClientProvider)
        assert clients.for_server(server, "slack:U1") is ada
        assert clients.for_server(server, "slack:U2") is not ada
        assert isinstance(clients.vault(server), SqliteVault)
    finally:
        anyio.run(clients.aclose)
    service = config({"identity": "service", "client_id": "svc", "client_secret": "x"})
    plain = OAuthClients(service, NoConsent(), {})
    assert isinstance(plain.for_server(service.servers["s"]), ClientCredentialsOAuthProvider)
    assert isinstance(plain.vault(service.servers["s"]), MemoryVault)  # no key: this process only
    signed = config({"identity": "service", "client_id": "svc", "private_key": "-----BEGIN PRIVATE KEY-----"})
    assert isinstance(OAuthClients(signed, NoConsent(), {}).for_server(signed.servers["s"]),
                      PrivateKeyJWTOAuthProvider)
    workload = config({"identity": "service", "client_id": "w", "assertion_env": "WORKLOAD_TOKEN"})
    assert isinstance(OAuthClients(workload, NoConsent(), {}).for_server(workload.servers["s"]),
                      WorkloadOAuthProvider)
    none = config({"identity": "none"})
    assert OAuthClients(none, NoConsent(), {}).for_server(none.servers["s"]) is None


def test_per_user_in_chat_needs_the_http_server_its_sign_ins_come_back_to() -> None:
    without = config({"identity": "per_user"}, {"K": KEY}, secrets_key_env="K", chat={"console": {}})
    assert preflight.problems(without, {"K": KEY}) == [
        "servers.s.auth: per_user in chat needs http.listen: each person's sign-in comes back to the bridge's HTTP "
        "server (<http.public_url>/oauth/callback)"]
    served = config({"identity": "per_user"}, {"K": KEY}, secrets_key_env="K", chat={"console": {}},
                    http={"listen": "127.0.0.1:8780", "public_url": "https://bridge.example.com"})
    assert preflight.problems(served, {"K": KEY}) == []
    shared = config({"identity": "shared"}, {}, chat={"console": {}})
    assert preflight.problems(shared) == []


def test_a_configured_id_token_is_refused_in_chat() -> None:
    """It is one person's: in chat every caller would act as them."""
    enterprise = {"identity": "enterprise", "client_id": "c", "client_secret": "x"}
    idp = {"issuer": "https://acme.okta.com", "client_id": "0oa1", "id_token": "${ID_TOKEN}"}
    env = {"K": KEY, "ID_TOKEN": "eyJ.e30.sig"}
    terminal = config(enterprise, env, secrets_key_env="K", identity_provider=idp)
    assert preflight.problems(terminal, env) == ["chat: configure at least one adapter (console, slack or matrix)"]
    chat = config(enterprise, env, secrets_key_env="K", identity_provider=idp, chat={"console": {}},
                  http={"listen": "127.0.0.1:8780"})
    assert preflight.problems(chat, env) == [
        "identity_provider.id_token: one ID token is one person; in chat everyone would use that person's accounts. "
        "Leave it out: each person signs in with the company themselves"]


def test_enterprise_servers_need_the_company_provider_a_confidential_client_and_a_key() -> None:
    assert problems({"servers": {"s": {"url": "https://a/mcp", "auth": {"identity": "enterprise"}}}}) == [
        "servers.s.auth: identity enterprise needs identity_provider (the company's OpenID Connect provider, where "
        "each person signs in)",
        "servers.s.auth: identity enterprise needs client_id and client_secret (the bridge's client at the server's "
        "authorization server)",
        "servers.s.auth: enterprise keeps each person's tokens, which must be encrypted: set secrets_key_env (or "
        "auth.key_env) to the name of an environment variable holding a key"]
    loaded = config({"identity": "enterprise", "client_id": "c", "client_secret": "${AS_SECRET}"},
                    {"MY_KEY": KEY, "IDP_SECRET": "idp-s3cr3t", "AS_SECRET": "as-s3cr3t"}, secrets_key_env="MY_KEY",
                    identity_provider={"issuer": "https://acme.okta.com", "client_id": "0oa1",
                                       "client_secret": "${IDP_SECRET}"})
    assert loaded.identity_provider is not None and loaded.identity_provider.label() == "acme.okta.com"
    assert loaded.identity_provider.scopes == ("openid", "profile", "email", "offline_access")
    assert "idp-s3cr3t" not in repr(loaded) and "as-s3cr3t" not in repr(loaded)
    assert "idp-s3cr3t" not in loaded.redactor.redact("idp-s3cr3t") and \
        "as-s3cr3t" not in loaded.redactor.redact("as-s3cr3t")
    assert identity_for(loaded.servers["s"], "slack:U1") == "slack:U1"
    assert problems({"identity_provider": {"issuer": "https://acme.okta.com", "client_id": "0oa1"}, "servers": {
        "s": {"url": "https://a/mcp", "auth": {"identity": "enterprise", "client_id": "c", "client_secret": "x",
                                               "key_env": "MY_KEY"}}}}, {"MY_KEY": KEY}) == [
        "servers.s.auth: the company sign-in is kept encrypted with the key named by secrets_key_env (auth.key_env "
        "covers only this server's tokens): set secrets_key_env"]
    with pytest.raises(AuthError):
        identity_for(loaded.servers["s"], None)
