"""DPoP (RFC 9449): sender-constrained tokens, where an authorization server offers them.

A DPoP-bound access token is only good together with a proof that the sender holds a private key: a small JWT
(`typ: dpop+jwt`, the public key in its header) signed for one request (`htm` its method, `htu` its URL without query
or fragment, `iat`, a fresh `jti`, and `ath`, the hash of the access token it goes with, or the server's `nonce`
when it asks for one). A token stolen from a log or a proxy is useless without the key.

- The key is the installation's: one P-256 key (ES256), made on first use and kept in the token vault, sealed with
  the same environment key as every token (`InstallationKey`); without a token key it lives as long as the process,
  like the tokens then.
- The bridge asks for a bound token when the authorization server's metadata lists ES256 among its
  `dpop_signing_alg_values_supported` (and `auth.dpop` is not false): its token requests (code, refresh, client
  credentials, workload) carry a proof; a token the server answers with `token_type: DPoP` is bound, and is then
  sent as `Authorization: DPoP <token>` with a proof on every request to the MCP server.
- A server that answers `use_dpop_nonce` (a 400 from the token endpoint, a 401 from the MCP server) with a
  `DPoP-Nonce` gets the request again at once, with the nonce in a fresh proof; a nonce a server hands out on any
  answer is used for its next proof.

The SDK's OAuth client has no DPoP, and its token model only admits `token_type: Bearer`. So this works around the
SDK's flow rather than inside it (`bridge.auth.oauth._Bridged` passes every request and answer through `Dpop`): the
requests it makes get their proof header (and the MCP request its `DPoP` scheme) on the way out, and a bound token's
answer reaches the SDK as a bearer one, its binding remembered here (in the vault beside the tokens, so a later process
knows). Proofs are made and signed with joserfc.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from typing import Any
from urllib.parse import parse_qs

import anyio
import httpx2
from joserfc import jwt
from joserfc.jwk import ECKey

from bridge.auth.tokens import TokenVault

ALGORITHM = "ES256"
CURVE = "P-256"
KEY_SLOT = ("", "installation", "dpop_key")
"""The vault slot (server, identity, kind) of the installation's key: no server's, nobody's tokens."""
BINDING = "dpop"
"""The vault kind, beside an account's tokens, that says whether they are DPoP-bound."""


def target_uri(url: httpx2.URL) -> str:
    """`htu`: the request's URL without query and fragment (RFC 9449 §4.2)."""
    return str(url.copy_with(query=None, fragment=None))


def token_hash(access_token: str) -> str:
    """`ath`: base64url of the SHA-256 of the access token's ASCII (RFC 9449 §4.2)."""
    digest = hashlib.sha256(access_token.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def make_proof(key: ECKey, method: str, url: httpx2.URL, *, access_token: str | None = None,
               nonce: str | None = None, now: float | None = None) -> str:
    """One request's proof, signed with `key`; the header carries only the public half."""
    claims: dict[str, Any] = {"jti": secrets.token_urlsafe(16), "htm": method, "htu": target_uri(url),
                              "iat": int(time.time() if now is None else now)}
    if access_token is not None:
        claims["ath"] = token_hash(access_token)
    if nonce is not None:
        claims["nonce"] = nonce
    header = {"typ": "dpop+jwt", "alg": ALGORITHM, "jwk": dict(key.as_dict(private=False))}
    return jwt.encode(header, claims, key, algorithms=[ALGORITHM])


class InstallationKey:
    """The installation's proof key, from the vault; made and kept there on first use.

    Two processes making the first key at the same moment each keep their own for the tokens they get then (the
    later write wins the slot); a token bound to the other key is refused, and the next sign-in binds to the kept
    one."""

    def __init__(self, vault: TokenVault) -> None:
        self._vault = vault
        self._key: ECKey | None = None
        self._lock = anyio.Lock()

    async def key(self) -> ECKey:
        async with self._lock:
            if self._key is None:
                stored = await self._vault.get(*KEY_SLOT)
                if stored is None:
                    made = ECKey.generate_key(CURVE, private=True)
                    await self._vault.put(*KEY_SLOT, dict(made.as_dict(private=True)))
                    self._key = made
                else:
                    self._key = ECKey.import_key(stored)
            return self._key


def _origin(url: httpx2.URL) -> str:
    return f"{url.scheme}://{url.netloc.decode()}"


def _form(request: httpx2.Request) -> dict[str, list[str]]:
    if request.method != "POST" or "x-www-form-urlencoded" not in request.headers.get("Content-Type", ""):
        return {}
    return parse_qs(request.content.decode(errors="replace"))


def is_token_request(request: httpx2.Request) -> bool:
    return "grant_type" in _form(request)


async def _json(response: httpx2.Response) -> dict[str, Any]:
    try:
        value = json.loads(await response.aread())
    except (ValueError, httpx2.HTTPError):
        return {}
    return value if isinstance(value, dict) else {}


class Dpop:
    """DPoP for one account's OAuth flow (one server, one identity): what goes on its requests, what its answers
    say. `main` marks the request being authorized (to the MCP server), as opposed to the flow's own requests."""

    def __init__(self, key: InstallationKey, vault: TokenVault, server: str, identity: str) -> None:
        self._key = key
        self._vault = vault
        self._slot = (server, identity, BINDING)
        self._offered = False
        """The authorization server's metadata lists our algorithm."""
        self._bound: bool | None = None
        """The account's tokens are DPoP-bound (None: not read from the vault yet)."""
        self._nonces: dict[str, str] = {}
        """The last nonce each origin handed out."""

    async def bound(self) -> bool:
        if self._bound is None:
            stored = await self._vault.get(*self._slot)
            self._bound = bool(stored and stored.get("bound"))
        return self._bound

    async def _bind(self, bound: bool) -> None:
        if bound != await self.bound():
            self._bound = bound
            await self._vault.put(*self._slot, {"bound": bound})

    async def sign(self, request: httpx2.Request, *, main: bool) -> None:
        """Put a fresh proof on the request if it needs one (and the DPoP scheme on a bound token)."""
        if main:
            scheme, _, token = request.headers.get("Authorization", "").partition(" ")
            if token and scheme.lower() in ("bearer", "dpop") and await self.bound():
                request.headers["Authorization"] = f"DPoP {token}"
                request.headers["DPoP"] = await self._proof(request, token)
        elif is_token_request(request) and (self._offered or await self.bound()):
            request.headers["DPoP"] = await self._proof(request, None)

    async def _proof(self, request: httpx2.Request, access_token: str | None) -> str:
        return make_proof(await self._key.key(), request.method, request.url, access_token=access_token,
                          nonce=self._nonces.get(_origin(request.url)))

    async def wants_nonce(self, request: httpx2.Request, response: httpx2.Response, *, main: bool) -> bool:
        """Whether the server refused the proof for want of a nonce it has now given (then sign and send again)."""
        nonce = response.headers.get("DPoP-Nonce")
        if nonce:
            self._nonces[_origin(request.url)] = nonce
        if not nonce or "DPoP" not in request.headers:
            return False
        if main:
            return response.status_code == 401 and "use_dpop_nonce" in response.headers.get("WWW-Authenticate", "")
        return response.status_code == 400 and (await _json(response)).get("error") == "use_dpop_nonce"

    async def received(self, request: httpx2.Request, response: httpx2.Response, *, main: bool) -> httpx2.Response:
        """The answer as the SDK should see it: what authorization-server metadata offers is noted, and a bound
        token's answer is handed on as a bearer one (the SDK admits no other type), its binding kept. The MCP
        server's answers are left alone (and unread: one may be a long event stream)."""
        if main:
            return response
        if request.method == "GET" and response.status_code == 200:
            metadata = await _json(response)
            if "token_endpoint" in metadata:
                offered = metadata.get("dpop_signing_alg_values_supported")
                self._offered = isinstance(offered, list) and ALGORITHM in offered
            return response
        if response.status_code != 200 or not is_token_request(request):
            return response
        answer = await _json(response)
        if "access_token" not in answer:
            return response
        bound = str(answer.get("token_type", "")).lower() == "dpop"
        await self._bind(bound)
        if not bound:
            return response
        headers = [(k, v) for k, v in response.headers.multi_items()
                   if k.lower() not in ("content-length", "content-encoding", "transfer-encoding")]
        return httpx2.Response(response.status_code, headers=headers, request=request,
                               content=json.dumps({**answer, "token_type": "Bearer"}).encode())
