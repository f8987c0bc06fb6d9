"""What the SDK's client auth raises, in words a person understands (an `AuthError` naming the server).

The SDK reports an authorization server's refusal as the raw HTTP answer ("Token exchange failed (400):
{"error": …}"); a person in chat should read "the authorization server refused the sign-in to X: …" instead, and
never a "failed to start … started again on next use" as if the MCP server were broken. The error body is untrusted
text from the server: only its `error` code and a shortened `error_description` are kept.
"""

from __future__ import annotations

import json

from mcp.client.auth import OAuthFlowError, OAuthRegistrationError, OAuthTokenError

from bridge.auth.signins import plain_oauth_error
from bridge.errors import AuthError
from bridge.text.plain import shorten


def _refusal(message: str) -> tuple[str, str] | None:
    """The OAuth `error` and `error_description` in an SDK message quoting the answer's JSON body, if any."""
    start = message.find("{")
    if start < 0:
        return None
    try:
        body = json.loads(message[start:])
    except ValueError:
        return None
    if not isinstance(body, dict) or not isinstance(body.get("error"), str):
        return None
    description = body.get("error_description")
    return body["error"], description if isinstance(description, str) else ""


def plain_auth_error(server: str, exc: OAuthFlowError) -> AuthError:
    """The AuthError a person is shown for an SDK OAuth failure while using `server`."""
    refusal = _refusal(str(exc))
    if isinstance(exc, OAuthRegistrationError):
        what = plain_oauth_error(*refusal) if refusal else shorten(str(exc), 300)
        return AuthError(f"the authorization server of {server} refused to register this bridge as a client: {what}")
    if isinstance(exc, OAuthTokenError) and refusal is not None:
        return AuthError(f"the authorization server refused the sign-in to {server}: {plain_oauth_error(*refusal)}")
    return AuthError(f"signing in to {server} failed: {shorten(str(exc), 300)}")
