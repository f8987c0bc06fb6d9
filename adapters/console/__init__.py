"""The console adapter: the bridge in a terminal, also driven by scripts through a pipe."""

from adapters.console.adapter import ConsoleAdapter, create, stream_lines

__all__ = ["ConsoleAdapter", "create", "stream_lines"]
