"""The bridge's one error tree.

    BridgeError
    ├── ConfigError              the config file is wrong; `problems` lists "path: problem" lines
    ├── UnsupportedSchema        an elicitation schema outside the spec's subset (sent back as -32602)
    ├── CommandError             a chat command that cannot run as typed (shown to the person, not logged as a fault)
    ├── ServerUnavailable        no such server, it is disabled, or the pool is full (the command layer words it)
    ├── InputRefused             a 2026 input request was refused, so the call is not retried; carries the ErrorData
    │   └── LimitExceeded        a bound of the `limits:` block was reached (too many open cards, requests)
    ├── SessionError             an MCP server could not be reached or used
    │   ├── ServerStartError     it failed to start or to negotiate; carries the stderr tail
    │   ├── ServerGoneError      it crashed or closed while in use; carries the stderr tail
    │   └── MessageTooLarge      it sent a message past `limits.message_size`, refused unread
    ├── StoreError               the store (SQLite file or Postgres) failed or cannot be used
    │   ├── StoreLocked          another bridge process holds this SQLite store; names its pid
    │   └── StoreSchemaError     the store was written by a newer bridge, or a migration failed
    ├── AuthError                OAuth could not finish: a person did not sign in in time, the authorization server
    │                            refused, or the server needs a sign-in this process cannot ask for
    ├── TokenStoreError          stored tokens cannot be read (wrong key, tampered file)
    └── AdapterError             a chat platform failed
        ├── PlatformAPIError     an API call failed (translated once, at the adapter's edge)
        └── RateLimited          the platform asked us to slow down; `retry_after` seconds
    (bridge.llm.errors) LLMError, HumanAnswerRequired; (bridge.llm) InvalidSamplingRequest

Protocol error codes the bridge sends or reads are named once, below; SDK and platform errors are translated once
at the edge that meets them (the tool-call owner for MCP, each adapter for its platform).

A person's refusal (decline, cancel, expiry) is never an exception: it is an `Outcome` value.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp.types import ErrorData

# JSON-RPC and MCP error codes, as numbers rather than imported from the SDK: `import bridge.errors` must stay cheap
# (the CLI's quick commands never load the SDK). tests/cli/test_start.py checks them against `mcp.types`.
CONNECTION_CLOSED = -32000
INTERNAL_ERROR = -32603
INVALID_PARAMS = -32602
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
URL_ELICITATION_REQUIRED = -32042
USER_REJECTED = -1
"""The code the 2025-11-25 spec gives for a person's rejection of a sampling request."""

__all__ = [
    "CONNECTION_CLOSED", "INTERNAL_ERROR", "INVALID_PARAMS", "INVALID_REQUEST", "METHOD_NOT_FOUND",
    "URL_ELICITATION_REQUIRED", "USER_REJECTED", "AdapterError", "BridgeError", "CommandError", "ConfigError",
    "InputRefused", "LimitExceeded", "MessageTooLarge", "PlatformAPIError", "RateLimited", "ServerGoneError",
    "ServerStartError", "ServerUnavailable", "SessionError", "UnsupportedSchema",
]


class BridgeError(Exception):
    """Base of every error the bridge raises on purpose."""


class ConfigError(BridgeError):
    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


class UnsupportedSchema(BridgeError):
    """The requestedSchema uses something the restricted elicitation subset does not allow."""


class CommandError(BridgeError):
    """A command a person typed cannot run; the message is meant for them."""


class ServerUnavailable(BridgeError):
    """A server cannot be used at all right now (unknown, disabled, or no room in the pool); the message is for
    people. Raised by the session pool; the command layer shows it like a `CommandError`."""


class InputRefused(BridgeError):
    """A 2026 input request was refused (a denial, an unsupported form): the call is not retried."""

    def __init__(self, error: ErrorData) -> None:
        self.error = error
        super().__init__(error.message)


class LimitExceeded(InputRefused):
    """A bound of the `limits:` block was reached: the request is refused with `error` (the server gets it, on either
    era), and the call it belongs to does not go on."""


class SessionError(BridgeError):
    def __init__(self, server: str, message: str, stderr_tail: str = "") -> None:
        self.server = server
        self.stderr_tail = stderr_tail
        super().__init__(message)


class ServerStartError(SessionError):
    pass


class ServerGoneError(SessionError):
    pass


class MessageTooLarge(SessionError):
    """A server sent a message larger than `limits.message_size`; the bridge stopped reading it
    (`bridge.servers.message_bound`). `restarts`: its session was ended for it (a stdio server's, see
    `bridge.servers.stdio.adopted`), so the server is started again on next use."""

    def __init__(self, server: str, message: str, restarts: bool) -> None:
        self.restarts = restarts
        super().__init__(server, message)


class StoreError(BridgeError):
    pass


class StoreLocked(StoreError):
    def __init__(self, path: str, pid: int | None) -> None:
        self.path = path
        self.pid = pid
        holder = f"process {pid}" if pid else "another process"
        super().__init__(f"the store {path} is in use by {holder} (one bridge process per SQLite store; "
                         "stop it first, or use a Postgres store for several workers)")


class StoreSchemaError(StoreError):
    pass


class AuthError(BridgeError):
    """Authorization did not complete; the message is meant for the person and never holds a token."""


class TokenStoreError(BridgeError):
    """Stored tokens cannot be opened (another key, or the file was tampered with)."""


class AdapterError(BridgeError):
    pass


class PlatformAPIError(AdapterError):
    def __init__(self, platform: str, method: str, error: str) -> None:
        self.platform = platform
        self.method = method
        self.error = error
        super().__init__(f"{platform} {method} failed: {error}")


class RateLimited(AdapterError):
    def __init__(self, platform: str, retry_after: float) -> None:
        self.retry_after = retry_after
        super().__init__(f"{platform} is rate-limiting us; retry after {retry_after:.0f}s")
