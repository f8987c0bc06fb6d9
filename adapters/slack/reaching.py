"""Reaching Slack when it cannot be reached: one plain line per attempt, further apart each time, and nothing else.

Without a network slack_sdk's Socket Mode client logs an ERROR with a traceback every ten seconds for ever, and bolt
warns about a `SLACK_BOT_TOKEN` in the environment that the bridge never reads (its tokens come from the config).
So: the bot's `auth.test` is tried with a backoff before Socket Mode is opened, and later reconnects (the network
dropped while serving) are logged as one warning line each, without the traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import aiohttp
import anyio
from slack_sdk.errors import SlackApiError

from bridge.errors import AdapterError

logger = logging.getLogger(__name__)

FIRST_WAIT = 1.0
LONGEST_WAIT = 300.0
"""Seconds between attempts: doubled from the first up to the longest."""
BOLT_LOGGERS = ("slack_bolt.AsyncApp", "slack_bolt.App")


def unreachable(exc: AdapterError) -> bool:
    """True for a failure of the network (no answer from Slack), False for Slack's own answer (`invalid_auth`)."""
    return not isinstance(exc.__cause__, SlackApiError) and isinstance(
        exc.__cause__, aiohttp.ClientError | TimeoutError | OSError)


async def until_reached(attempt: Callable[[], Awaitable[object]], wait: float = FIRST_WAIT) -> AdapterError | None:
    """Run `attempt` until Slack answers; None once it did, or the error Slack answered with (not a network one)."""
    while True:
        try:
            await attempt()
            return None
        except AdapterError as exc:
            if not unreachable(exc):
                return exc
            logger.warning("Slack is not reachable (%s); trying again in %s", exc, _seconds(wait))
        await anyio.sleep(wait)
        wait = min(wait * 2, LONGEST_WAIT)


class _QuietReconnects(logging.Filter):
    """bolt's warning about a token it will not use dropped; Socket Mode's reconnect errors made one warning line."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message.startswith("As you gave `client` as well, `token` will be unused"):
            return False
        if message.startswith("Failed to connect (error:") and record.levelno >= logging.ERROR:
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.msg, record.args = f"Slack Socket Mode: {message.replace('; Retrying...', '; retrying')}", None
            record.exc_info = record.exc_text = None
        return True


def quiet_bolt() -> None:
    """Install the filter on bolt's app loggers (the Socket Mode handler logs through the app's logger)."""
    for name in BOLT_LOGGERS:
        log = logging.getLogger(name)
        if not any(isinstance(f, _QuietReconnects) for f in log.filters):
            log.addFilter(_QuietReconnects())


def _seconds(value: float) -> str:
    return f"{value:g}s" if value < 60 else f"{value / 60:g}m"
