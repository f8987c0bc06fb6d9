"""Token revocation at logout (RFC 7009), where the authorization server offers it.

The SDK's client auth has no revocation, so this is the one request the bridge writes itself: the authorization
server is found the way the SDK finds it (protected-resource metadata, then authorization-server metadata, with the
SDK's discovery helpers and the same issuer check), and each stored token is posted to its `revocation_endpoint`
with the client's own authentication. Best effort: logout forgets the tokens whatever the server answers.
"""

from __future__ import annotations

import logging

import httpx2
from mcp.client.auth import OAuthFlowError
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    build_protected_resource_metadata_discovery_urls,
    create_oauth_metadata_request,
    handle_auth_metadata_response,
    handle_protected_resource_response,
    validate_metadata_issuer,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata, OAuthToken

logger = logging.getLogger(__name__)

TIMEOUT = 10.0


async def revocation_endpoint(http: httpx2.AsyncClient, server_url: str) -> str | None:
    """The revocation endpoint of the authorization server protecting `server_url`, or None."""
    metadata = await _authorization_server(http, server_url)
    endpoint = metadata.revocation_endpoint if metadata is not None else None
    return str(endpoint) if endpoint else None


async def _authorization_server(http: httpx2.AsyncClient, server_url: str) -> OAuthMetadata | None:
    issuer: str | None = None
    for url in build_protected_resource_metadata_discovery_urls(None, server_url):
        prm = await handle_protected_resource_response(await http.send(create_oauth_metadata_request(url)))
        if prm is not None and prm.authorization_servers:
            issuer = str(prm.authorization_servers[0])
            break
    for url in build_oauth_authorization_server_metadata_discovery_urls(issuer, server_url):
        keep_looking, metadata = await handle_auth_metadata_response(
            await http.send(create_oauth_metadata_request(url)))
        if metadata is not None:
            if issuer is not None:
                validate_metadata_issuer(metadata, issuer)
            return metadata
        if not keep_looking:
            break
    return None


async def revoke(server_url: str, token: OAuthToken, client: OAuthClientInformationFull | None) -> bool:
    """Revoke the refresh token (which ends the grant) and the access token. True when the server took them."""
    if client is None or not client.client_id:
        return False
    try:
        async with httpx2.AsyncClient(timeout=TIMEOUT) as http:
            endpoint = await revocation_endpoint(http, server_url)
            if endpoint is None:
                return False
            done = True
            for value, hint in ((token.refresh_token, "refresh_token"), (token.access_token, "access_token")):
                if value:
                    data, auth = _request(client, value, hint)
                    response = await (http.post(endpoint, data=data, auth=auth) if auth is not None
                                      else http.post(endpoint, data=data))
                    done = done and response.status_code == 200
            return done
    except (httpx2.HTTPError, OAuthFlowError, ValueError) as exc:
        logger.info("could not revoke a token at %s's authorization server: %s", server_url, type(exc).__name__)
        return False


def _request(client: OAuthClientInformationFull, token: str, hint: str) -> tuple[dict[str, str], httpx2.Auth | None]:
    """The form and client authentication for one revocation, as the client was registered to authenticate."""
    data = {"token": token, "token_type_hint": hint}
    method = client.token_endpoint_auth_method or ("client_secret_basic" if client.client_secret else "none")
    if method == "client_secret_basic" and client.client_secret:
        assert client.client_id is not None
        return data, httpx2.BasicAuth(client.client_id, client.client_secret)
    data["client_id"] = client.client_id or ""
    if client.client_secret:
        data["client_secret"] = client.client_secret
    return data, None
