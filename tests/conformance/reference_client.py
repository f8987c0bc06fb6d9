"""The reference: the same plan as the bridge's driver (`plan.py`), run by a bare `mcp` SDK client.

Invoked by the conformance runner as `python reference_client.py URL`. Scenarios this client fails too are marked
expected-to-fail for the bridge, with the reason, so the suite measures the bridge against what the SDK itself does.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
from mcp import Client
from mcp.client import ClientRequestContext
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from mcp.types import ElicitRequestFormParams, ElicitRequestParams, ElicitResult, Implementation

from tests.conformance import plan

warnings.simplefilter("ignore")  # deprecation notes of the SDK are not the subject here


class MemoryStorage:
    def __init__(self, client_info: OAuthClientInformationFull | None = None) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info = client_info

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


def oauth(url: str, auth: dict[str, Any]) -> httpx2.Auth:
    if "assertion" in auth:
        raise SystemExit("the SDK has no JWT-bearer grant for a workload's token without a client secret")
    if auth["identity"] == "service":
        if "private_key" in auth:
            signer = SignedJWTParameters(issuer=auth["client_id"], subject=auth["client_id"],
                                         signing_key=auth["private_key"], signing_algorithm=auth["signing_algorithm"])
            return PrivateKeyJWTOAuthProvider(url, MemoryStorage(), auth["client_id"],
                                              signer.create_assertion_provider())
        return ClientCredentialsOAuthProvider(url, MemoryStorage(), auth["client_id"], auth["client_secret"])
    redirect = "http://127.0.0.1:3030/callback"
    received: dict[str, str] = {}

    async def browse(authorization_url: str) -> None:
        # The "browser": the test authorization servers redirect straight back with a code.
        async with httpx2.AsyncClient() as http:
            response = await http.get(authorization_url, follow_redirects=False)
        query = parse_qs(urlsplit(response.headers.get("location", "")).query)
        received.update({k: v[0] for k, v in query.items()})

    async def callback() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=received.get("code", ""), state=received.get("state"),
                                       iss=received.get("iss"))

    info = None
    if "client_id" in auth:
        info = OAuthClientInformationFull(client_id=auth["client_id"], client_secret=auth.get("client_secret"),
                                          redirect_uris=[redirect],  # type: ignore[list-item]
                                          token_endpoint_auth_method="client_secret_basic")
    metadata = OAuthClientMetadata(client_name="conformance reference", redirect_uris=[redirect])  # type: ignore[list-item]
    return OAuthClientProvider(url, metadata, MemoryStorage(info), browse, callback,
                               client_metadata_url=None if info else auth.get("client_metadata_url"))


async def accept_defaults(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
    if isinstance(params, ElicitRequestFormParams):
        return ElicitResult(action="accept", content=plan.form_answers(params.requested_schema))
    return ElicitResult(action="accept")


async def main(url: str) -> int:
    auth = plan.auth_settings(plan.context())
    failures = 0
    async with httpx2.AsyncClient(auth=oauth(url, auth), timeout=httpx2.Timeout(30.0, read=None)) as http, \
            Client(streamable_http_client(url, http_client=http), mode="auto", elicitation_callback=accept_defaults,
                   client_info=Implementation(name="conformance-reference", version="1")) as client:
        tools = (await client.list_tools()).tools
        listed = [tool.model_dump(by_alias=True, mode="json", exclude_none=True) for tool in tools]
        for name, arguments in plan.calls(listed):
            try:
                result = await client.call_tool(name, arguments)
                print(name, "->", "error" if result.is_error else "ok", file=sys.stderr)
            except Exception as exc:  # noqa: BLE001 - a scenario may fail a call on purpose; go on with the others
                failures += 1
                print(name, "raised", type(exc).__name__, exc, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[-1]))
