"""OpenTelemetry traces: spans from a real host and in-process server (the SDK's in-memory exporter), the OTLP export
a `telemetry:` block configures (received over real HTTP), and nothing loaded when traces are off or the extra is
missing."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, ClassVar

import anyio
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from bridge.door.model import DecisionIn, JSONValue, MessageIn
from bridge.errors import PlatformAPIError
from bridge.observe import hooks as observe
from bridge.observe.tracing import TelemetryConfig, Tracing, traces, wanted
from tests.harness.hosts import ALICE, ROOM, config_for, host_for, patient
from tests.servers.inline import form_server

pytestmark = pytest.mark.anyio
ANSWER: dict[str, JSONValue] = {
    "name": "Ada", "email": "ada@example.com", "homepage": "https://example.org", "start": "2026-12-01",
    "pickup": "2026-12-01T09:30:00Z", "travellers": "3", "budget": "9", "window": True, "climate": "cold",
    "city": "osl", "room": "x", "activities": ["hiking"], "extras": ["pk"]}


@pytest.fixture
def spans() -> Iterator[tuple[InMemorySpanExporter, Tracing]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing = Tracing(provider.get_tracer("test"))
    with observe.observing(tracing):
        yield exporter, tracing
    provider.shutdown()


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


@pytest.mark.parametrize("protocol", ["legacy", "auto"])
async def test_a_tool_call_and_its_form_are_spans(spans: tuple[InMemorySpanExporter, Tracing],
                                                  protocol: str) -> None:
    exporter, _ = spans
    host, chat = await host_for(config_for({"forms": form_server()}, server_protocol=protocol))
    async with host:
        await host.handle_message(MessageIn(ROOM, ALICE, "call forms fill", explicit_command=True))
        with anyio.fail_after(patient(10)):
            card = await chat.wait_card()
            await host.decide(DecisionIn(card.id, ALICE, "accept", ANSWER))
            await chat.wait_message("forms.fill:")
    # A 2026 `call` parks once its card is posted: one span until then, one for its continuation after the answer.
    calls = sorted(named(exporter, "tool_call forms.fill"), key=lambda s: s.start_time or 0)
    assert len(calls) == (1 if protocol == "legacy" else 2)
    call, last = calls[0], calls[-1]
    for each in calls:
        assert dict(each.attributes or {}) == {"bridge.server": "forms", "bridge.tool": "fill"}
        assert each.status.status_code is StatusCode.UNSET
    [interaction] = named(exporter, "interaction form")
    assert dict(interaction.attributes or {}) == {
        "bridge.interaction.kind": "form", "bridge.platform": "test", "bridge.server": "forms",
        "bridge.interaction.id": card.id, "bridge.outcome": "accepted"}
    assert call.start_time is not None and interaction.start_time is not None and last.end_time is not None
    assert call.start_time < interaction.start_time and interaction.end_time is not None
    assert interaction.end_time <= last.end_time
    if protocol == "auto":
        # The bridge drives a 2026 call's input requests itself: the card is posted inside the call's span.
        assert interaction.parent is not None and interaction.parent.span_id == call.context.span_id
    # No arguments, answers or text ever reach a span.
    assert "Ada" not in str([dict(s.attributes or {}) for s in exporter.get_finished_spans()])


async def test_chat_calls_are_client_spans_failed_by_type_only(spans: tuple[InMemorySpanExporter, Tracing]) -> None:
    exporter, _ = spans
    with observe.chat_call("slack", "chat.postMessage"):
        pass
    with pytest.raises(PlatformAPIError), observe.chat_call("slack", "chat.update"):
        raise PlatformAPIError("slack", "chat.update", "message_not_found for secret text")
    ok, failed = exporter.get_finished_spans()
    assert (ok.name, ok.kind.name, ok.status.status_code) == ("slack chat.postMessage", "CLIENT", StatusCode.UNSET)
    assert (failed.name, failed.status.status_code, failed.status.description) == (
        "slack chat.update", StatusCode.ERROR, "PlatformAPIError")
    assert failed.events == ()  # no exception event: its message may hold what people typed


async def test_a_stopped_call_is_not_a_failed_span(spans: tuple[InMemorySpanExporter, Tracing]) -> None:
    exporter, _ = spans
    with anyio.CancelScope() as scope, observe.tool_call("s", "t"):
        scope.cancel()
        await anyio.sleep_forever()
    [span] = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.UNSET


def test_traces_are_on_only_when_configured() -> None:
    assert not wanted(TelemetryConfig(), {})
    assert wanted(TelemetryConfig(otlp_endpoint="http://c:4318"), {})
    assert wanted(TelemetryConfig(), {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"})
    assert wanted(TelemetryConfig(), {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"})
    assert not wanted(TelemetryConfig(otlp_endpoint="http://c:4318"), {"OTEL_SDK_DISABLED": "true"})
    with traces(TelemetryConfig(), {}) as observer:
        assert observer is None


class _Collector(BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[str, bytes]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Collector.received.append((self.path, body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


EXPORT = """
import sys
from bridge.observe import hooks as observe
from bridge.observe.tracing import TelemetryConfig, traces
with traces(TelemetryConfig(otlp_endpoint=sys.argv[1], service_name="bridge-under-test"), {}) as observer:
    assert observer is not None
    with observe.tool_call("demo", "plan_trip"):
        pass
"""


def test_a_configured_endpoint_receives_the_spans_over_otlp_http() -> None:
    collector = HTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=collector.serve_forever, daemon=True)
    thread.start()
    try:
        # A process of its own: the provider becomes the global one, which a process may set only once.
        done = subprocess.run([sys.executable, "-c", EXPORT, f"http://127.0.0.1:{collector.server_port}"],
                              capture_output=True, text=True, timeout=60, check=False)
    finally:
        collector.shutdown()
        thread.join(timeout=10)
        collector.server_close()
    assert done.returncode == 0, done.stderr
    [(path, body)] = _Collector.received
    assert path == "/v1/traces"
    request = ExportTraceServiceRequest.FromString(body)
    [resource] = request.resource_spans
    attributes = {a.key: a.value.string_value for a in resource.resource.attributes}
    assert attributes["service.name"] == "bridge-under-test"
    assert [s.name for scope in resource.scope_spans for s in scope.spans] == ["tool_call demo.plan_trip"]


NO_SDK = """
import logging, sys, json
sys.modules["opentelemetry.sdk"] = None  # the otel extra is not installed
logging.basicConfig(stream=sys.stdout, format="%(levelname)s %(message)s")
from bridge.observe.tracing import TelemetryConfig, traces
with traces(TelemetryConfig(otlp_endpoint="http://127.0.0.1:9"), {}) as observer:
    print(json.dumps(observer))
"""

OFF = """
import sys
from bridge.cli import entry as cli
from bridge.observe import hooks as observe, tracing
with tracing.traces(tracing.TelemetryConfig(), {}) as observer:
    with observe.tool_call("s", "t"):
        pass
assert observer is None
print(sorted(m for m in sys.modules if m.startswith(("opentelemetry.sdk", "opentelemetry.exporter", "prometheus"))))
"""


def test_without_the_extra_a_configured_endpoint_is_a_warning_and_nothing_else() -> None:
    done = subprocess.run([sys.executable, "-c", NO_SDK], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    warning, result = done.stdout.splitlines()
    assert warning.startswith("WARNING telemetry: traces are configured but the otel extra is not installed")
    assert json.loads(result) is None


def test_unconfigured_traces_load_nothing() -> None:
    done = subprocess.run([sys.executable, "-c", OFF], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
