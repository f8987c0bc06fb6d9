"""What happens in the bridge, told to whoever observes it: metrics (`bridge.observe.metrics`) and traces
(`bridge.observe.tracing`).

Each place an event happens has one line here: the broker (a card posted, an interaction ended), the session pool
(a server that failed to start), the store (a commit), tool calls, and the adapters (a platform API call, a
rate-limit wait). Adapters may import this module, as they import `bridge.door.ports`: it is how they report to the core
without importing the metrics module (import-linter keeps them out of it). It imports nothing beyond the standard
library, so hooks cost no start time.

Observers are process-wide (one bridge runs per process); the CLI adds them when it serves /metrics or exports
traces, tests add theirs with `observing`. With none, every hook is a test of an empty tuple. An observer that fails
is logged and skipped: watching the bridge must never break a decision.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bridge.door.model import Interaction, Outcome

logger = logging.getLogger(__name__)


class Observer:
    """The events, each ignored here: an observer overrides those it cares about."""

    def card_posted(self, interaction: Interaction) -> None:
        """A card was posted in its conversation (the person's clock starts)."""

    def interaction_ended(self, interaction: Interaction, outcome: Outcome) -> None:
        """An interaction got its outcome (decided, expired, withdrawn, failed), once."""

    def server_start_failed(self, server: str) -> None:
        """An MCP server could not be started (or connected to)."""

    def store_committed(self, seconds: float) -> None:
        """A store write was committed, `seconds` after it was asked for."""

    def rate_limit_wait(self, platform: str, method: str, seconds: float) -> None:
        """A chat platform answered a call with a rate limit, and the call waits `seconds` before trying again."""

    def tool_call(self, server: str, tool: str) -> AbstractContextManager[object] | None:
        """Entered around one tool call (from its start to its result)."""
        return None

    def chat_call(self, platform: str, method: str) -> AbstractContextManager[object] | None:
        """Entered around one chat platform API call; an exception leaving it (a bridge `AdapterError`) is a failed
        call."""
        return None


_observers: tuple[Observer, ...] = ()
_Enter = Callable[[Observer], AbstractContextManager[object] | None]


def add(observer: Observer) -> None:
    global _observers
    _observers = (*_observers, observer)


def remove(observer: Observer) -> None:
    global _observers
    _observers = tuple(o for o in _observers if o is not observer)


@contextmanager
def observing(*observers: Observer) -> Iterator[None]:
    """Add observers for the duration of a block (a `run`, a test)."""
    for observer in observers:
        add(observer)
    try:
        yield
    finally:
        for observer in observers:
            remove(observer)


def _failed(observer: Observer, event: str) -> None:
    logger.warning("observer %s failed on %s", type(observer).__name__, event, exc_info=True)


# -- the hooks -----------------------------------------------------------------------------------------------------

def card_posted(interaction: Interaction) -> None:
    for observer in _observers:
        try:
            observer.card_posted(interaction)
        except Exception:  # noqa: BLE001 - see the module docstring
            _failed(observer, "card_posted")


def interaction_ended(interaction: Interaction, outcome: Outcome) -> None:
    for observer in _observers:
        try:
            observer.interaction_ended(interaction, outcome)
        except Exception:  # noqa: BLE001
            _failed(observer, "interaction_ended")


def server_start_failed(server: str) -> None:
    for observer in _observers:
        try:
            observer.server_start_failed(server)
        except Exception:  # noqa: BLE001
            _failed(observer, "server_start_failed")


def store_committed(started: float) -> None:
    """A store write asked for at `started` (`time.perf_counter()`) is committed."""
    if not _observers:
        return
    seconds = time.perf_counter() - started
    for observer in _observers:
        try:
            observer.store_committed(seconds)
        except Exception:  # noqa: BLE001
            _failed(observer, "store_committed")


def rate_limit_wait(platform: str, method: str, seconds: float) -> None:
    for observer in _observers:
        try:
            observer.rate_limit_wait(platform, method, seconds)
        except Exception:  # noqa: BLE001
            _failed(observer, "rate_limit_wait")


_NOTHING: AbstractContextManager[None] = nullcontext()
"""What a hook around a call is when nobody observes: no generator made and stepped per call (stateless, shared)."""


def tool_call(server: str, tool: str) -> AbstractContextManager[None]:
    if not _observers:
        return _NOTHING
    return _entered("tool_call", lambda o: o.tool_call(server, tool))


def chat_call(platform: str, method: str) -> AbstractContextManager[None]:
    if not _observers:
        return _NOTHING
    return _entered("chat_call", lambda o: o.chat_call(platform, method))


@contextmanager
def _entered(event: str, enter: _Enter) -> Iterator[None]:
    with ExitStack() as stack:
        for observer in _observers:
            try:
                manager = enter(observer)
                if manager is not None:
                    stack.enter_context(manager)
            except Exception:  # noqa: BLE001
                _failed(observer, event)
        yield
