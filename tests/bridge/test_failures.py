"""How errors become lines for a command-line user: groups unwrapped, duplicates merged, bugs called bugs."""

from __future__ import annotations

import asyncio

from bridge.cli.failures import EXIT_INTERNAL, EXIT_USAGE, brief, report
from bridge.errors import ConfigError, PlatformAPIError


def test_nested_groups_are_unwrapped_and_cancellations_dropped() -> None:
    inner = ExceptionGroup("inner", [ConfigError(["chat.matrix: not installed"]), ValueError("x")])
    outer = BaseExceptionGroup("outer", [inner, asyncio.CancelledError(), ConfigError(["chat.matrix: not installed"])])
    lines, code = report(outer)
    assert lines == ["chat.matrix: not installed",
                     "error: unexpected ValueError: x (a bug: run with --debug and report the traceback)"]
    assert code == EXIT_INTERNAL


def test_platform_and_os_errors_are_one_line_each() -> None:
    lines, code = report(ExceptionGroup("g", [PlatformAPIError("matrix", "login", "refused\n  twice")]))
    assert (lines, code) == (["error: matrix login failed: refused twice"], EXIT_USAGE)
    assert report(FileNotFoundError(2, "No such file or directory", "/x"))[0] == [
        "error: /x: No such file or directory"]
    assert brief(ExceptionGroup("g", [OSError("gone")])) == "OSError: gone"
