"""What a command-line user sees when something fails: one line per distinct problem, never a traceback.

Errors reach the CLI wrapped in task-group `ExceptionGroup`s (one per nesting level) and chained through `__cause__`;
this module unwraps them and turns each leaf into a sentence. The traceback is for `--debug` only.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import traceback
from collections.abc import Iterator

from bridge.errors import BridgeError, ConfigError
from bridge.safety.sanitize import clean

EXIT_USAGE = 2
"""Config, usage, input and connection errors: something the user can fix."""
EXIT_INTERNAL = 3
"""Anything unexpected: a bug in the bridge (the traceback is shown with --debug)."""
EXIT_INTERRUPTED = 130
"""Ctrl-C, as shells report a process ended by SIGINT."""


def leaves(exc: BaseException) -> Iterator[BaseException]:
    """The exceptions inside `exc`, groups flattened, cancellations left out (they are a consequence)."""
    import asyncio  # here: the quick commands (--version, check-config) never load asyncio

    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from leaves(inner)
    elif not isinstance(exc, asyncio.CancelledError):
        yield exc


def describe(exc: BaseException) -> list[str]:
    """The lines a user sees for one (already unwrapped) error."""
    if isinstance(exc, ConfigError):
        return list(exc.problems)
    if isinstance(exc, BridgeError):
        return [f"error: {_one_line(str(exc))}"]
    if isinstance(exc, json.JSONDecodeError):
        return [f"error: not valid JSON: {exc}"]
    if isinstance(exc, sqlite3.Error):
        return [f"error: the store: {_one_line(str(exc))}"]
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return [f"error: {where}{exc.strerror or _one_line(str(exc))}"]
    name = type(exc).__name__
    return [f"error: unexpected {name}: {_one_line(str(exc))} (a bug: run with --debug and report the traceback)"]


def report(exc: BaseException) -> tuple[list[str], int]:
    """Every distinct line for `exc` (groups unwrapped), and the exit code."""
    lines: list[str] = []
    code = EXIT_USAGE
    for leaf in leaves(exc):
        if not isinstance(leaf, BridgeError | OSError | json.JSONDecodeError | sqlite3.Error):
            code = EXIT_INTERNAL
        for line in describe(leaf):
            if line not in lines:
                lines.append(line)
    return lines or ["error: interrupted"], code


def brief(exc: BaseException) -> str:
    """`Type: message` for each leaf, for log lines (where "error:" would be noise)."""
    return " | ".join(f"{type(leaf).__name__}: {_one_line(str(leaf))}" for leaf in leaves(exc))


def full_traceback(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))


class _NoAuthTracebacks(logging.Filter):
    """The SDK logs its OAuth failures with a traceback; the bridge says what failed in one line instead (a sign-in
    that is needed is routine, not a crash). `--log-level debug` keeps them."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.startswith("mcp.client.auth") and record.exc_info:
            record.exc_info = None
            record.exc_text = None
            return record.getMessage() != "OAuth flow error"
        return True


def quiet_auth_tracebacks(level: str) -> None:
    if level != "debug":
        for handler in logging.getLogger().handlers:
            handler.addFilter(_NoAuthTracebacks())


def _one_line(text: str) -> str:
    # Errors may quote a server (a tool name, its message): cleaned like every other output of server text.
    return " ".join(clean(text).split()) or "(no message)"
