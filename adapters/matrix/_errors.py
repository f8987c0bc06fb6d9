"""The one place where nio's failures become the bridge's errors.

nio reports most failures as values (`ErrorResponse` subclasses such as `RoomSendError`), some as exceptions
(transport errors after its retries, encryption trouble). Every API call of the adapter goes through `call`, so the
rest of the adapter and the core only ever see `PlatformAPIError` and `RateLimited`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

import aiohttp
import nio
from nio import exceptions as nio_exceptions

from bridge.errors import AdapterError, PlatformAPIError, RateLimited

T = TypeVar("T")
PLATFORM = "matrix"

NIO_FAILURES: tuple[type[BaseException], ...] = (
    nio_exceptions.ProtocolError,
    nio_exceptions.OlmTrustError,
    nio_exceptions.EncryptionError,
    nio_exceptions.GroupEncryptionError,
    aiohttp.ClientError,
    asyncio.TimeoutError,
)


class UnknownToken(PlatformAPIError):
    """The homeserver no longer accepts the access token (logged out, revoked or expired)."""


class LoginLost(AdapterError):
    """The bot's login is gone and cannot be renewed without a person (no password configured): `serve` ends."""


def check(response: T, method: str) -> T:
    """Return a successful response; raise for an `ErrorResponse`."""
    if isinstance(response, nio.ErrorResponse):
        code = str(response.status_code or "")
        if code in ("M_LIMIT_EXCEEDED", "429"):
            retry_after: Any = getattr(response, "retry_after_ms", None) or 0
            raise RateLimited(PLATFORM, float(retry_after) / 1000)
        if code == "M_UNKNOWN_TOKEN":
            raise UnknownToken(PLATFORM, method, f"{code} {response.message}".strip())
        raise PlatformAPIError(PLATFORM, method, f"{code} {response.message}".strip())
    return response


async def call(method: str, awaitable: Awaitable[T]) -> T:
    """Await one nio API call and translate whatever failure it reports."""
    try:
        response = await awaitable
    except NIO_FAILURES as exc:
        raise PlatformAPIError(PLATFORM, method, f"{type(exc).__name__}: {exc}") from exc
    return check(response, method)
