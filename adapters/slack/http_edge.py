"""Slack's HTTP mode at its edge: what is not a well-formed request signed by Slack is refused before bolt sees it.

bolt answers 500 to a signature header it cannot read (a timestamp that is not a number, a signature that is not
ASCII) and to an unsigned body that is not JSON, because it parses the body and the headers before checking them; at
debug level it logs a refused request's whole body. Here each request is read whole (within the connection guard's
read deadline), then its headers are checked, its signature verified with slack_sdk's verifier, and its body parsed
with bolt's own parser: a refusal is a 401 (not Slack's) or 400 (not readable), and its body is never logged.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from urllib.parse import parse_qsl

from aiohttp import web
from aiohttp.typedefs import Middleware
from slack_bolt.request.internals import parse_body
from slack_sdk.signature import SignatureVerifier

from bridge.web.guard import ConnectionGuard

logger = logging.getLogger(__name__)

TIMESTAMP = re.compile(r"[0-9]{1,12}")
SIGNATURE = re.compile(r"v0=[0-9a-f]{64}")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def refusal(verifier: SignatureVerifier, headers: Mapping[str, str], body: bytes) -> tuple[int, str] | None:
    """Why a request is refused, as (status, short reason); None for a well-formed request Slack signed."""
    timestamp = headers.get("X-Slack-Request-Timestamp", "")
    signature = headers.get("X-Slack-Signature", "")
    if not TIMESTAMP.fullmatch(timestamp) or not SIGNATURE.fullmatch(signature):
        # Slack's certificate check of a slash command's URL; bolt answers it (200, nothing done) as it always has.
        return None if _ssl_check(body) else (401, "not signed")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return 400, "not UTF-8"
    if not verifier.is_valid(text, timestamp, signature):
        return 401, "bad or stale signature"
    try:
        parse_body(text, headers.get("Content-Type"))
    except ValueError:  # json.JSONDecodeError is one
        return 400, "unreadable body"
    return None


def _ssl_check(body: bytes) -> bool:
    return ("ssl_check", "1") in parse_qsl(body.decode("utf-8", "replace"), max_num_fields=20)


def middleware(signing_secret: str, guard: ConnectionGuard) -> Middleware:
    verifier = SignatureVerifier(signing_secret)

    @web.middleware
    async def checked(request: web.Request, handler: Handler) -> web.StreamResponse:
        transport = request.transport
        try:
            body = await request.read()
        except web.HTTPException:
            raise  # too large: aiohttp's 413
        except Exception:  # noqa: BLE001 - the client went away mid-body (or the guard closed it): nobody to answer
            return web.Response(status=400)
        if transport is not None:
            guard.busy(transport)
        try:
            if request.method == "POST":
                refused = refusal(verifier, request.headers, body)
                if refused is not None:
                    status, reason = refused
                    logger.debug("refused a request on the Slack events path: %s", reason)
                    return web.json_response({"error": reason}, status=status)
            return await handler(request)
        finally:
            if transport is not None:
                guard.idle(transport)

    return checked
