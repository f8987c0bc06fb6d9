"""The bridge's Prometheus metrics: an observer of `bridge.observe` plus a collector that reads live state at scrape.

Counters and histograms are fed by the hooks (outcomes, decision latency, server start failures, chat API calls,
errors and rate-limit waits, store commits); gauges of what is open now (interactions, sessions) are read from the
broker and the session pool when /metrics is scraped, so they can never drift from the truth. Everything lives in
the bridge's own `CollectorRegistry`, never prometheus-client's global one, and every sample carries the worker's
name (`worker`), so several bridge workers scraped by one Prometheus stay apart.

Loaded only when the HTTP server is configured (`http.listen`): prometheus-client costs start time.
"""

from __future__ import annotations

import time
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from bridge.door.model import Interaction, Kind, Outcome
from bridge.errors import AdapterError
from bridge.observe.hooks import Observer

PREFIX = "mcp_bridge"
DECISION_BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 4 * 3600.0, 24 * 3600.0)
"""Seconds from a card posted to a person's decision: people answer in seconds to hours."""
COMMIT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
"""Seconds from a store write asked for to its commit: a millisecond is normal, a second means a sick disk."""

Sessions = Callable[[], Iterable[tuple[str, str]]]
"""The live sessions as (server name, state) pairs."""


class Metrics(Observer):
    """Every metric of one bridge worker. `watch` adds the live gauges; `exposition` renders the text format."""

    def __init__(self, worker: str, registry: CollectorRegistry | None = None) -> None:
        self.worker = worker
        self.registry = registry or CollectorRegistry()
        r, w = self.registry, ["worker"]
        self.outcomes = Counter(f"{PREFIX}_interaction_outcomes", "Interactions ended, by kind and outcome "
                                "(accepted, declined, cancelled, expired, failed).", [*w, "kind", "outcome"],
                                registry=r)
        self.decision_latency = Histogram(f"{PREFIX}_decision_latency_seconds", "Seconds from a card posted to a "
                                          "person's decision on it, by kind.", [*w, "kind"], registry=r,
                                          buckets=DECISION_BUCKETS)
        self.start_failures = Counter(f"{PREFIX}_server_start_failures", "MCP servers that failed to start (or to "
                                      "connect), by server.", [*w, "server"], registry=r)
        self.chat_calls = Counter(f"{PREFIX}_chat_api_calls", "Chat platform API calls, by platform and method.",
                                  [*w, "platform", "method"], registry=r)
        self.chat_errors = Counter(f"{PREFIX}_chat_api_errors", "Chat platform API calls that failed (after the "
                                   "client's retries), by platform and method.", [*w, "platform", "method"],
                                   registry=r)
        self.rate_limit_waits = Counter(f"{PREFIX}_chat_rate_limit_waits", "Times a chat platform's rate limit made "
                                        "a call wait before trying again, by platform and method.",
                                        [*w, "platform", "method"], registry=r)
        self.rate_limit_seconds = Counter(f"{PREFIX}_chat_rate_limit_wait_seconds", "Seconds the platforms asked "
                                          "the bridge to wait (Retry-After), by platform.", [*w, "platform"],
                                          registry=r)
        self.store_commit = Histogram(f"{PREFIX}_store_commit_seconds", "Seconds from a store write asked for to "
                                      "its commit.", w, registry=r, buckets=COMMIT_BUCKETS)
        self._posted: dict[str, float] = {}
        """Interaction id -> when its card was posted (monotonic), until it ends."""

    def watch(self, interactions: Callable[[], Iterable[Interaction]], sessions: Sessions, *,
              platforms: Iterable[str], servers: Iterable[str], states: Iterable[str]) -> None:
        """Add the gauges read at scrape: open interactions (by kind and platform) and sessions (by server and
        state). Every combination of the given platforms, kinds, servers and states is shown, zeros included, so a
        series never vanishes when it drops to nothing."""
        self.registry.register(_Live(self.worker, interactions, sessions, tuple(platforms), tuple(servers),
                                     tuple(states)))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    # -- the observer --------------------------------------------------------------------------------------------

    def card_posted(self, interaction: Interaction) -> None:
        self._posted[interaction.id] = time.monotonic()

    def interaction_ended(self, interaction: Interaction, outcome: Outcome) -> None:
        kind = interaction.kind.value
        self.outcomes.labels(self.worker, kind, outcome.status.value).inc()
        posted = self._posted.pop(interaction.id, None)
        if posted is not None and outcome.by is not None:  # a person's decision, not an expiry or a withdrawal
            self.decision_latency.labels(self.worker, kind).observe(time.monotonic() - posted)

    def server_start_failed(self, server: str) -> None:
        self.start_failures.labels(self.worker, server).inc()

    def store_committed(self, seconds: float) -> None:
        self.store_commit.labels(self.worker).observe(seconds)

    def rate_limit_wait(self, platform: str, method: str, seconds: float) -> None:
        self.rate_limit_waits.labels(self.worker, platform, method).inc()
        self.rate_limit_seconds.labels(self.worker, platform).inc(max(0.0, seconds))

    @contextmanager
    def chat_call(self, platform: str, method: str) -> Iterator[None]:
        self.chat_calls.labels(self.worker, platform, method).inc()
        try:
            yield
        except AdapterError:
            self.chat_errors.labels(self.worker, platform, method).inc()
            raise


class _Live(Collector):
    def __init__(self, worker: str, interactions: Callable[[], Iterable[Interaction]], sessions: Sessions,
                 platforms: tuple[str, ...], servers: tuple[str, ...], states: tuple[str, ...]) -> None:
        self._worker = worker
        self._interactions = interactions
        self._sessions = sessions
        self._platforms, self._servers, self._states = platforms, servers, states

    def collect(self) -> Iterator[Metric]:
        open_now = Tally((i.kind.value, i.conversation.platform) for i in self._interactions())
        family = GaugeMetricFamily(f"{PREFIX}_open_interactions", "Interactions open now (cards waiting for a "
                                   "person), by kind and platform.", labels=["worker", "kind", "platform"])
        shown = {(k.value, p) for k in Kind for p in self._platforms}
        for kind, platform in sorted(shown | set(open_now)):
            family.add_metric([self._worker, kind, platform], open_now.get((kind, platform), 0))
        yield family
        live = Tally(self._sessions())
        family = GaugeMetricFamily(f"{PREFIX}_sessions", "MCP sessions in the pool now, by server and state.",
                                   labels=["worker", "server", "state"])
        shown = {(s, st) for s in self._servers for st in self._states}
        for server, state in sorted(shown | set(live)):
            family.add_metric([self._worker, server, state], live.get((server, state), 0))
        yield family


__all__ = ["Metrics"]
