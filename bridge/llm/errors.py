"""Errors of the LLM layer, and the helpers that build them at a provider's edge.

    BridgeError
    └── LLMError                 a model call failed; `retryable` and `status` say whether trying later may help
        └── HumanAnswerRequired  the "human" provider: a person must write the answer (not a fault)

Each provider translates its SDK's exceptions exactly once, in `complete()`, with
`raise LLMError(...) from exc`. This module never imports an SDK: the helpers work
on plain values so that the core keeps no hard dependency on the optional extras.

API keys must never reach a message or a log line. Servers do echo keys back (an
OpenAI-compatible proxy may put the whole bearer token in its 401 body), so every
message built here goes through `redact`, and `scrub` cleans the SDK exception that
stays attached as `__cause__` (a traceback prints it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from bridge.errors import BridgeError

if TYPE_CHECKING:
    from bridge.llm.types import LLMRequest

_MAX_DETAIL = 300
"""Provider error bodies can be long HTML pages; chat messages and logs want one line."""

_RETRYABLE_STATUSES = frozenset({408, 409, 429})


class LLMError(BridgeError):
    """A model call failed.

    Attributes:
        retryable: True when the same request may succeed later (rate limit, overload,
            timeout, connection failure). The SDK has already spent its own retries.
        status: The HTTP status the endpoint answered with, or None when there was no answer.
    """

    def __init__(self, message: str, *, retryable: bool = False, status: int | None = None) -> None:
        self.retryable = retryable
        self.status = status
        super().__init__(message)


class HumanAnswerRequired(LLMError):
    """No model is configured: the host must ask a person to write the answer.

    This is a signal, not a fault; the host catches it and switches its sampling
    review step into "write the reply yourself" mode.
    """

    def __init__(self, request: LLMRequest) -> None:
        self.request = request
        super().__init__("no LLM is configured; a person has to write this answer")


def missing_extra(provider: str) -> LLMError:
    """The error for a provider whose SDK (an optional extra) is not installed."""
    # The package is not on PyPI: name the extra and how a clone installs it, not a `pip install` that cannot work.
    return LLMError(f"the {provider} provider needs the llm extra: install the bridge with it "
                    "(pip install '.[llm]' in its clone; see the README's Installing)")


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """Replace every occurrence of each secret in `text` with `***`."""
    for secret in secrets:
        # Very short "keys" (e.g. "x" for a local server) would shred the message; they are not secrets.
        if secret and len(secret) >= 8:
            text = text.replace(secret, "***")
    return text


def scrub(exc: BaseException, secrets: Iterable[str | None]) -> None:
    """Redact secrets from an SDK exception in place, because it stays chained as `__cause__`."""
    secrets = tuple(secrets)
    exc.args = tuple(redact(a, secrets) if isinstance(a, str) else a for a in exc.args)
    message = getattr(exc, "message", None)
    if isinstance(message, str):
        # SDK exceptions keep a `message` copy that their __str__ may prefer over args.
        exc.message = redact(message, secrets)  # type: ignore[attr-defined]
    if hasattr(exc, "body"):
        exc.body = None


def body_detail(body: object, fallback: str) -> str:
    """The human-readable part of an error body: `error.message`, `message`, or the fallback."""
    detail: Any = None
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        detail = inner.get("message") if isinstance(inner, Mapping) else inner
    text = detail if isinstance(detail, str) and detail else fallback
    text = " ".join(text.split())
    return text if len(text) <= _MAX_DETAIL else text[: _MAX_DETAIL - 1] + "…"


def status_error(provider: str, status: int, detail: str, secrets: Iterable[str | None]) -> LLMError:
    """Map an HTTP error status to an `LLMError` whose message says what to do about it."""
    if status == 429:
        what = "rate-limited"
    elif status in (401, 403):
        what = "authentication failed (check the API key)"
    elif status == 404:
        what = "not found (check the model name and base URL)"
    elif status >= 500:
        what = "server error"
    else:
        what = "request rejected"
    retryable = status in _RETRYABLE_STATUSES or status >= 500
    message = f"{provider}: {what} (HTTP {status}): {detail}"
    return LLMError(redact(message, secrets), retryable=retryable, status=status)


def connection_error(provider: str, *, timed_out: bool, timeout: float) -> LLMError:
    """The error for a request that got no HTTP answer at all."""
    if timed_out:
        return LLMError(f"{provider}: no answer within {timeout:g}s", retryable=True)
    # No URL in the message: base URLs can carry userinfo credentials.
    return LLMError(f"{provider}: could not connect to the endpoint", retryable=True)
