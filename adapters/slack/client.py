"""The Web API client and the one place Slack's failures become bridge errors.

slack_sdk's own retry handlers deal with rate limits (HTTP 429, honouring Retry-After) and dropped connections
before anything reaches us; whatever still fails is translated here, once, into `PlatformAPIError` or
`RateLimited`, so the rest of the adapter and the core see only the bridge's error tree.

Two exceptions to retrying. A dropped connection is not retried for `chat.postMessage`: the message may have been
delivered before the connection dropped, and a second post would show the card twice (a failed post is reported
instead). And a client made with `max_rate_limit_wait` gives up on a Retry-After longer than that, so a caller with
a deadline (finishing a card) can reschedule instead of sleeping past it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import aiohttp
import anyio
from slack_bolt.authorization import AuthorizeResult
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse
from slack_sdk.webhook.async_client import AsyncWebhookClient

from adapters.slack.inflight import SharedLookups
from adapters.slack.settings import SlackSettings
from bridge.errors import PlatformAPIError, RateLimited
from bridge.observe import hooks as observe

PLATFORM = "slack"
RETRIES = 2
TIMEOUT = 30
"""Seconds a Web API call may take (slack_sdk's default)."""
FINAL_RATE_LIMIT_WAIT = 2.0
"""Longest Retry-After a final card update waits out in the call; a longer one is rescheduled (broker gives 10 s)."""
NOT_RETRIED_ON_CONNECTION_ERRORS = frozenset({"chat.postMessage"})
"""Methods that are not idempotent: retrying after a dropped connection may post the same message twice."""


class ConnectionErrorRetry(AsyncConnectionErrorRetryHandler):
    """slack_sdk's connection-error retries, except for methods that must not run twice."""

    async def _can_retry_async(self, *, state: RetryState, request: HttpRequest,
                               response: HttpResponse | None = None, error: Exception | None = None) -> bool:
        if api_method(request.url) in NOT_RETRIED_ON_CONNECTION_ERRORS:
            return False
        return await super()._can_retry_async(state=state, request=request, response=response, error=error)


class RateLimitRetry(AsyncRateLimitErrorRetryHandler):
    """slack_sdk's rate-limit retries, waiting out a Retry-After only up to `max_wait` seconds (None: any)."""

    def __init__(self, max_retry_count: int, max_wait: float | None = None) -> None:
        super().__init__(max_retry_count=max_retry_count)
        self.max_wait = max_wait

    async def _can_retry_async(self, *, state: RetryState, request: HttpRequest,
                               response: HttpResponse | None = None, error: Exception | None = None) -> bool:
        if not await super()._can_retry_async(state=state, request=request, response=response, error=error):
            return False
        if self.max_wait is None or response is None:
            return True
        headers = {k.lower(): v for k, v in response.headers.items()}
        return _seconds(headers.get("retry-after", "1")) <= self.max_wait

    async def prepare_for_next_attempt_async(self, *, state: RetryState, request: HttpRequest,
                                             response: HttpResponse | None = None,
                                             error: Exception | None = None) -> None:
        if response is not None:  # slack_sdk sleeps Retry-After (plus up to a second) before the next attempt
            headers = {k.lower(): v for k, v in response.headers.items()}
            observe.rate_limit_wait(PLATFORM, api_method(request.url), _seconds(headers.get("retry-after", "1")))
        await super().prepare_for_next_attempt_async(state=state, request=request, response=response, error=error)


def web_client(token: str | None, api_url: str, *, max_rate_limit_wait: float | None = None) -> AsyncWebClient:
    return AsyncWebClient(
        token=token,
        base_url=api_url,
        timeout=TIMEOUT,
        retry_handlers=[RateLimitRetry(RETRIES, max_rate_limit_wait), ConnectionErrorRetry(max_retry_count=RETRIES)],
    )


class SlackClients:
    """The Web API clients of one adapter, made in one place so that they share one HTTP session.

    Without a session of its own, slack_sdk opens and closes an aiohttp session (a new connection; a TLS handshake
    against the real Slack) for every call. `shared_session()`, held open by the adapter's `serve()`, gives every
    client made here one `aiohttp.ClientSession`, so calls reuse its pooled keep-alive connections. Outside it (before
    serving starts, or while the host finishes cards after it ended) the clients still work, one session per call.
    """

    def __init__(self, settings: SlackSettings) -> None:
        self.api_url = settings.api_url
        self.final_wait = FINAL_RATE_LIMIT_WAIT
        """The longest Retry-After `final` waits out."""
        self._bot_token = settings.bot_token
        self._app_token = settings.app_token
        self._session: aiohttp.ClientSession | None = None
        self._made: list[AsyncWebClient] = []
        self.bot = self._client(settings.bot_token)
        """Everything the bot does, waiting out rate limits as slack_sdk's retries allow."""
        self.final = self._client(settings.bot_token, max_rate_limit_wait=self.final_wait)
        """For final card and modal updates, which have a deadline: a long rate limit is rescheduled, not slept."""
        self.for_bolt = self._client(None)
        """What bolt copies into each request's `context.client`: no token of its own, since the token comes with
        `authorize` (below), which answers from one shared `auth.test`."""
        self._identity = SharedLookups[str, AsyncSlackResponse]()
        self._auth: AsyncSlackResponse | None = None

    def _client(self, token: str | None, *, max_rate_limit_wait: float | None = None) -> AsyncWebClient:
        client = web_client(token, self.api_url, max_rate_limit_wait=max_rate_limit_wait)
        client.session = self._session
        self._made.append(client)
        return client

    def socket_mode(self) -> AsyncWebClient:
        """A client with the app-level token, for opening Socket Mode connections."""
        return self._client(self._app_token)

    def webhook(self, url: str) -> AsyncWebhookClient:
        """A client for one interaction's `response_url` (on the shared session). A dropped connection is not
        retried: the message may have been shown already."""
        return AsyncWebhookClient(url, timeout=TIMEOUT, session=self._session, retry_handlers=[RateLimitRetry(RETRIES)])

    @asynccontextmanager
    async def shared_session(self) -> AsyncIterator[None]:
        """One HTTP session for every client made here, closed on leaving."""
        session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT))
        self._use(session)
        try:
            yield
        finally:
            self._use(None)
            with anyio.CancelScope(shield=True):
                await session.close()

    @property
    def session(self) -> aiohttp.ClientSession | None:
        """The shared session while serving, else None."""
        return self._session

    def _use(self, session: aiohttp.ClientSession | None) -> None:
        self._session = session
        for client in self._made:
            client.session = session  # read on every call, so this takes effect at once

    async def auth(self) -> AsyncSlackResponse:
        """The bot's `auth.test` (its user id, team, workspace URL): asked once, shared by concurrent callers, kept
        once it succeeded (a token's identity does not change while it is valid)."""
        if self._auth is None:
            self._auth = await self._identity.get("auth", self._auth_test)
        return self._auth

    async def _auth_test(self) -> AsyncSlackResponse:
        async with api_errors("auth.test"):
            return await self.bot.auth_test()

    def authorizer(self) -> Callable[[], Awaitable[AuthorizeResult]]:
        """bolt's `authorize` for this one workspace: every request, however many arrive before the first answer,
        waits on the same single `auth.test`. (A plain function: bolt passes what its parameters are named.)"""

        async def authorize() -> AuthorizeResult:
            return AuthorizeResult.from_auth_test_response(bot_token=self._bot_token,
                                                           auth_test_response=await self.auth())

        return authorize

    async def workspace_url(self) -> str:
        """The workspace's address (`https://acme.slack.com/`), for building message permalinks."""
        return str((await self.auth()).get("url") or "")


def clients(settings: SlackSettings) -> SlackClients:
    return SlackClients(settings)


def api_method(url: str) -> str:
    """The Web API method of a request URL (`https://slack.com/api/chat.postMessage?x=1` → `chat.postMessage`)."""
    return url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]


@asynccontextmanager
async def api_errors(method: str) -> AsyncIterator[None]:
    """Translate a failed Web API call into `RateLimited` (still limited after the retries) or `PlatformAPIError`
    (Slack's error code, e.g. `channel_not_found`, or the transport's failure). The call is reported to the core's
    observers (metrics, traces), failed if one of these leaves it."""
    with observe.chat_call(PLATFORM, method):
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
