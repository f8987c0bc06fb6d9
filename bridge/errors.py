"""The bridge's one error tree.

    BridgeError
    ├── ConfigError              the config file is wrong; `problems` lists "path: problem" lines
    ├── UnsupportedSchema        an elicitation schema outside the spec's subset (sent back as -32602)
    ├── CommandError             a chat command that cannot run as typed (shown to the person, not logged as a fault)
    ├── SessionError             an MCP server could not be reached or used
    │   ├── ServerStartError     it failed to start or to negotiate; carries the stderr tail
    │   └── ServerGoneError      it crashed or closed while in use; carries the stderr tail
    ├── AuthError                OAuth could not finish: a person did not sign in in time, the authorization server
    │                            refused, or the server needs a sign-in this process cannot ask for
    ├── TokenStoreError          stored tokens cannot be read (wrong key, tampered file)
    └── AdapterError             a chat platform failed
        ├── PlatformAPIError     an API call failed (translated once, at the adapter's edge)
        └── RateLimited          the platform asked us to slow down; `retry_after` seconds

A person's refusal (decline, cancel, expiry) is never an exception: it is an `Outcome` value.
"""

from __future__ import annotations


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


class SessionError(BridgeError):
    def __init__(self, server: str, message: str, stderr_tail: str = "") -> None:
        self.server = server
        self.stderr_tail = stderr_tail
        super().__init__(message)


class ServerStartError(SessionError):
    pass


class ServerGoneError(SessionError):
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
