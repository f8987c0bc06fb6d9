"""Optional OpenTelemetry traces: one span per tool call, per interaction (card posted → ended) and per chat API call.

On when `telemetry.otlp_endpoint` is configured or the standard `OTEL_EXPORTER_OTLP_ENDPOINT` /
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` variables are set (and `OTEL_SDK_DISABLED` is not true); spans go out over
OTLP/HTTP. It needs the `otel` extra (the SDK and the OTLP exporter), imported only then: without it, or unconfigured,
nothing is loaded and every hook stays a no-op. The provider is made the global one, so the MCP SDK's own client
spans (and the `traceparent` it sends to servers) join the bridge's tool-call spans.

Spans carry names, kinds, servers, tools, platforms, methods and outcomes; never arguments, answers or error text
(which may hold what people typed): a failed span says only the error's type.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bridge.observe import hooks as observe
from bridge.observe.hooks import Observer

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

    from bridge.door.model import Interaction, Outcome

logger = logging.getLogger(__name__)

SERVICE_NAME = "mcp-chat-bridge"
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


@dataclass(frozen=True, slots=True)
class TelemetryConfig:
    """The `telemetry:` block. Empty: traces follow the standard OTEL_* variables (off when none is set)."""

    otlp_endpoint: str = ""
    """The collector's OTLP/HTTP base address (`http://collector:4318`); `/v1/traces` is added."""
    service_name: str = ""


def telemetry_config(raw: Mapping[str, Any]) -> TelemetryConfig:
    return TelemetryConfig(otlp_endpoint=str(raw.get("otlp_endpoint", "")), service_name=str(raw.get("service_name",
                                                                                                         "")))


def wanted(config: TelemetryConfig, env: Mapping[str, str]) -> bool:
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return bool(config.otlp_endpoint or any(env.get(name) for name in ENDPOINT_VARIABLES))


@contextmanager
def traces(config: TelemetryConfig, env: Mapping[str, str] | None = None) -> Iterator[Observer | None]:
    """Export traces for the duration of a `run`, when configured and the `otel` extra is installed; flush at the
    end. Yields the observer, or None when traces are off."""
    env = os.environ if env is None else env
    if not wanted(config, env):
        yield None
        return
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        logger.warning("telemetry: traces are configured but the otel extra is not installed "
                       "(pip install '.[otel]' in the bridge's clone); going on without them")
        yield None
        return
    name = config.service_name or env.get("OTEL_SERVICE_NAME") or SERVICE_NAME
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    endpoint = config.otlp_endpoint.rstrip("/")
    exporter = OTLPSpanExporter(endpoint=endpoint if endpoint.endswith("/v1/traces") else f"{endpoint}/v1/traces") \
        if endpoint else OTLPSpanExporter()  # the exporter reads the OTEL_EXPORTER_OTLP_* variables itself
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    observer = Tracing(provider.get_tracer("mcp-chat-bridge"))
    try:
        with observe.observing(observer):
            yield observer
    finally:
        provider.shutdown()  # sends what is still buffered


class Tracing(Observer):
    """Spans from the bridge's events, made by `tracer` (tests give one with an in-memory exporter)."""

    def __init__(self, tracer: Tracer) -> None:
        self._tracer = tracer
        self._open: dict[str, Span] = {}
        """Interaction id -> its span, from the card posted until the interaction ends."""

    @contextmanager
    def _span(self, name: str, attributes: dict[str, str], client: bool = False) -> Iterator[None]:
        from opentelemetry.trace import SpanKind, Status, StatusCode

        with self._tracer.start_as_current_span(name, kind=SpanKind.CLIENT if client else SpanKind.INTERNAL,
                                                attributes=attributes, record_exception=False,
                                                set_status_on_exception=False) as span:
            try:
                yield
            except Exception as exc:  # not cancellation: a stopped call is not a failed one
                span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
                raise

    def tool_call(self, server: str, tool: str) -> Any:
        return self._span(f"tool_call {server}.{tool}", {"bridge.server": server, "bridge.tool": tool})

    def chat_call(self, platform: str, method: str) -> Any:
        return self._span(f"{platform} {method}", {"bridge.platform": platform, "bridge.chat.method": method},
                          client=True)

    def card_posted(self, interaction: Interaction) -> None:
        self._open[interaction.id] = self._tracer.start_span(f"interaction {interaction.kind.value}",
                                                             attributes=_about(interaction))

    def interaction_ended(self, interaction: Interaction, outcome: Outcome) -> None:
        from opentelemetry.trace import Status, StatusCode

        # One that ends before its card was posted (it could not be) still gets its span, of no length.
        span = self._open.pop(interaction.id, None) or self._tracer.start_span(
            f"interaction {interaction.kind.value}", attributes=_about(interaction))
        span.set_attribute("bridge.outcome", outcome.status.value)
        if outcome.status.value == "failed":
            span.set_status(Status(StatusCode.ERROR, "failed"))
        span.end()


def _about(interaction: Interaction) -> dict[str, str]:
    return {"bridge.interaction.kind": interaction.kind.value, "bridge.platform": interaction.conversation.platform,
            "bridge.server": interaction.server.name, "bridge.interaction.id": interaction.id}


__all__ = ["TelemetryConfig", "Tracing", "telemetry_config", "traces", "wanted"]
