"""`limits.message_size` at a session's transport: one message from a server (a stdio line, an HTTP response body, one
server-sent event) is refused as soon as it passes the bound, before it is held whole.

The transport counts and stops reading; the session's `MessageBound` remembers what was refused, so the calls that
fail because of it (`bridge.calls.rounds.guarded`) say so, naming the server and the size, instead of "stopped during
the call". Pure: no I/O here; `bridge.servers.stdio` and `bridge.servers.transports` read.
"""

from __future__ import annotations

from dataclasses import dataclass

from bridge.errors import MessageTooLarge

_REFUSED = "refused by the bridge"
"""In every refusal's text, so a refusal is told from other errors that carry text from the transport."""


@dataclass(frozen=True, slots=True)
class Refusal:
    size: int | None
    """The message's size in bytes, when it is known (an HTTP body's Content-Length); else it passed `limit`."""
    closed: bool
    """The session's transport was ended for it: every call in flight on it failed."""


class MessageBound:
    """One session's bound, and the last message its transport refused."""

    def __init__(self, server: str, limit: int) -> None:
        self.server = server
        self.limit = limit
        self.refusal: Refusal | None = None
        self.http_session = ""
        """The `Mcp-Session-Id` an HTTP server gave, as its responses carry it (seen where their size is counted):
        a task is bound to the HTTP session that created it, so a task's stored row keeps it."""
        self.http_version = ""
        """The protocol version the session's requests name (for the `DELETE` that ends it)."""
        self.keep_session = False
        """A stored task is bound to this HTTP session: it is not ended when the bridge closes it, so the next start
        can follow the task on it (`keep_for_task`)."""

    def keep_for_task(self) -> None:
        """Leave the HTTP session open at the server when the bridge closes it: a stored task is bound to it."""
        self.keep_session = True

    def refuse(self, size: int | None = None, *, closed: bool) -> str:
        """Record a refused message; the text the transport's error carries (the SDK puts it in the call's error)."""
        self.refusal = Refusal(size, closed)
        return self._words(self.refusal)

    def explains(self, message: str | None) -> MessageTooLarge | None:
        """The error to report for a failed request, if a refusal caused it: when the transport was ended for one,
        every request it failed (`message` None, or the SDK's "Connection closed"); else the request whose error
        carries the refusal's text."""
        refusal = self.refusal
        if refusal is None:
            return None
        if refusal.closed or (message is not None and _REFUSED in message):
            return MessageTooLarge(self.server, self._words(refusal), restarts=refusal.closed)
        return None

    def _words(self, refusal: Refusal) -> str:
        size = f"a message of {size_words(refusal.size)}" if refusal.size is not None else (
            f"a message larger than {size_words(self.limit)}")
        then = "; it was not read, and the session with the server was ended" if refusal.closed else "; it was not read"
        return (f"{self.server} sent {size}, over this bridge's limit of {size_words(self.limit)} "
                f"(limits.message_size), {_REFUSED}{then}.")


def size_words(size: int) -> str:
    if size >= 1024**2:
        return f"{size / 1024**2:.1f} MB"
    return f"{size / 1024:.0f} KB" if size >= 1024 else f"{size} bytes"


class EventSizes:
    """Bytes of the server-sent event being read, chunk by chunk: an event ends at a blank line. One search per
    chunk (bytes.rfind, in C), so counting costs nothing next to reading."""

    _ENDS = (b"\n\n", b"\r\n\r\n", b"\r\r")

    def __init__(self) -> None:
        self.size = 0
        self._tail = b""

    def feed(self, chunk: bytes) -> int:
        """The size of the event open after this chunk (the part after its last blank line)."""
        window = self._tail + chunk
        end = max((at + len(mark) for mark in self._ENDS if (at := window.rfind(mark)) >= 0), default=-1)
        if end >= 0:
            self.size = len(window) - end
        else:
            self.size += len(chunk)
        self._tail = window[-3:]
        return self.size
