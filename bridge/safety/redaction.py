"""Secrets stay out of what the bridge writes: logs, the chat, a server's stderr tail.

The config knows every value that came from the environment (`${VAR}`) and every value that is a secret by its place
(headers, a server's env, tokens, keys, passwords); `bridge.config` builds one `Redactor` from them when it loads.
It replaces each such value wherever it appears with `[redacted]`. Short values (under `MIN_LENGTH` characters) are
left alone: no credential is that short, and redacting `true` or `8080` everywhere would garble every message.

Logs: `install` puts a `RedactingFilter` on the root handlers, so every record that reaches them (the bridge's, the
SDK's, any library's) is redacted, its traceback included. Libraries that log whole payloads at debug level (Slack's
SDK and Bolt, matrix-nio, httpx/httpcore, aiohttp) are kept at info even under `--log-level debug`
(`quiet_payload_loggers`): a modal submission or a sync response holds what people typed.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

MIN_LENGTH = 6
MASK = "[redacted]"
PAYLOAD_LOGGERS = ("slack_sdk", "slack_bolt", "nio", "httpx", "httpcore", "httpx2", "httpcore2", "aiohttp",
                   "websockets", "mcp")
"""Libraries whose debug output carries request and response bodies."""


class Redactor:
    """Replaces known secret values in text. Built once (one regular expression over all the values), then linear
    in the text it is given."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        kept = sorted({v for v in values if isinstance(v, str) and len(v.strip()) >= MIN_LENGTH}, key=len,
                      reverse=True)
        self._values = tuple(kept)
        # Longest first, so a token is not half-replaced by a shorter value it contains.
        self._pattern = re.compile("|".join(re.escape(v) for v in kept)) if kept else None

    def __bool__(self) -> bool:
        return self._pattern is not None

    def __repr__(self) -> str:
        return f"Redactor({len(self._values)} values)"  # never the values

    def redact(self, text: str) -> str:
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(MASK, text)

    def __add__(self, other: Redactor) -> Redactor:
        return Redactor(self._values + other._values)


class RedactingFilter(logging.Filter):
    """Redacts a log record's message in place (a handler filter: it sees every record the handler writes, whichever
    logger made it), for whatever reads records rather than text."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = self.redactor.redact(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True


class RedactingFormatter(logging.Formatter):
    """A handler's own formatter, with what it writes redacted: tracebacks and stacks included, however the inner
    formatter renders them."""

    def __init__(self, inner: logging.Formatter, redactor: Redactor) -> None:
        super().__init__()
        self.inner = inner
        self.redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        return self.redactor.redact(self.inner.format(record))


def install(redactor: Redactor, root: logging.Logger | None = None) -> None:
    """Redact everything the root logger's handlers write (replacing an earlier redactor)."""
    for handler in (root or logging.getLogger()).handlers:
        for old in [f for f in handler.filters if isinstance(f, RedactingFilter)]:
            handler.removeFilter(old)
        inner = handler.formatter or logging.Formatter()
        if isinstance(inner, RedactingFormatter):
            inner = inner.inner
        handler.setFormatter(RedactingFormatter(inner, redactor) if redactor else inner)
        if redactor:
            handler.addFilter(RedactingFilter(redactor))


class QuietPayloads(logging.Filter):
    """Drops debug records of libraries that log payloads. A handler filter as well as logger levels, because some
    set their own loggers' level from the root's when they create them (Bolt does)."""

    _prefixes = tuple(f"{name}." for name in PAYLOAD_LOGGERS)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.INFO:
            return True
        return not (record.name in PAYLOAD_LOGGERS or record.name.startswith(self._prefixes))


def quiet_payload_loggers(root_level: int, root: logging.Logger | None = None) -> None:
    """Keep libraries that log payloads at info or above, whatever the bridge's own level."""
    for name in PAYLOAD_LOGGERS:
        logging.getLogger(name).setLevel(max(logging.INFO, root_level))
    for handler in (root or logging.getLogger()).handlers:
        if not any(isinstance(f, QuietPayloads) for f in handler.filters):
            handler.addFilter(QuietPayloads())
