"""Revocation at logout (RFC 7009), found the way the SDK finds the authorization server: revoked where the server
offers a revocation endpoint (the SDK's authorization-server pieces), skipped without error where it does not."""

from __future__ import annotations

import pytest
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyUrl

from bridge.auth.revoke import revoke
from tests.servers.oauth import Provider, protected_server
from tests.servers.service_account import Accounts, service_server
from tests.servers.serving import bound_socket, serve

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

CLIENT = OAuthClientInformationFull(client_id="c1", client_secret="s1", redirect_uris=[AnyUrl("http://127.0.0.1/cb")],
                                    token_endpoint_auth_method="client_secret_post")


async def test_both_tokens_are_revoked_where_the_server_offers_it() -> None:
    provider = Provider()
    provider.clients["c1"] = CLIENT
    issued = provider._issue("c1", ["mcp"], None, "ada")
    sock = bound_socket()
    with serve(protected_server(provider, sock), sock) as base:
        assert await revoke(f"{base}/mcp", issued, CLIENT) is True
    assert set(provider.revoked) == {issued.access_token, issued.refresh_token}
    assert provider.access == {} and provider.refresh == {}


async def test_a_server_without_revocation_is_skipped_quietly() -> None:
    sock = bound_socket()
    with serve(service_server(Accounts(), sock), sock) as base:
        token = OAuthToken(access_token="a-token", token_type="Bearer", refresh_token="r-token")
        assert await revoke(f"{base}/mcp", token, CLIENT) is False
