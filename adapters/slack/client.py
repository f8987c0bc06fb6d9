"""The Web API client and the one place Slack's failures become bridge errors.

slack_sdk's own retry handlers deal with rate limits (HTTP 429, honouring Retry-After) and dropped connections
before anything reaches us; whatever still fails is translated here, once, into `PlatformAPIError` or
`RateLimited`, so the rest of the adapter and the core see only the bridge's error tree.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from bridge.errors import PlatformAPIError, RateLimited

PLATFORM = "slack"
RETRIES = 2


def web_client(token: str, api_url: str) -> AsyncWebClient:
    return AsyncWebClient(
        token=token,
        base_url=api_url,
        retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=RETRIES),
                        AsyncConnectionErrorRetryHandler(max_retry_count=RETRIES)],
    )


@asynccontextmanager
async def api_errors(method: str) -> AsyncIterator[None]:
    """Translate a failed Web API call into `RateLimited` (still limited after the retries) or `PlatformAPIError`
    (Slack's error code, e.g. `channel_not_found`, or the transport's failure)."""
    try:
        yield
    except SlackApiError as exc:
        response = exc.response
        if response.status_code == 429:
            retry_after = response.headers.get("Retry-After", response.headers.get("retry-after", "1"))
            raise RateLimited(PLATFORM, _seconds(retry_after)) from exc
        raise PlatformAPIError(PLATFORM, method, str(response.get("error") or "unknown_error")) from exc
    except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
        raise PlatformAPIError(PLATFORM, method, f"{type(exc).__name__}: {exc}") from exc


def _seconds(value: object) -> float:
    if isinstance(value, list | tuple):
        value = value[0] if value else "1"
    try:
        return float(str(value))
    except ValueError:
        return 1.0
