"""A real OTLP/gRPC trace receiver, in the test process: what a collector would be given.

Built from the ``opentelemetry-proto`` messages and service (no collector binary): a gRPC server
on a free port answering ``opentelemetry.proto.collector.trace.v1.TraceService/Export``, keeping
every span it is sent. Point a process at it with ``OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint``
(and ``OTEL_BSP_SCHEDULE_DELAY`` small, so spans leave within a fraction of a second), then poll
``spans_of(trace_id)`` with a deadline (``tests/support/polling.py``).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1 import trace_pb2

__all__ = ["OtlpReceiver", "ReceivedSpan", "otlp_receiver"]

KINDS = {value: name.removeprefix("SPAN_KIND_") for name, value in trace_pb2.Span.SpanKind.items()}
STATUSES = {value: name.removeprefix("STATUS_CODE_") for name, value in trace_pb2.Status.StatusCode.items()}


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return tuple(_value(item) for item in value.array_value.values)
    if which == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    return None if which is None else getattr(value, which)


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs if isinstance(pair, KeyValue)}


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as exported; IDs in lower-case hex, as OpenTelemetry writes them (``parent_id``
    empty for a root)."""

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    kind: str
    """``SERVER``, ``CLIENT``, ``INTERNAL``, ``PRODUCER``, ``CONSUMER``."""
    status: str
    """``UNSET``, ``OK``, ``ERROR``."""
    attributes: dict[str, Any]
    service: str
    """The exporting process's ``service.name``."""
    scope: str
    """The instrumentation scope (the tracer's name)."""
    start_ns: int = field(default=0, compare=False)


class _Service(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, receiver: OtlpReceiver) -> None:
        self._receiver = receiver

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        received = []
        for resource_spans in request.resource_spans:
            service = str(_attributes(resource_spans.resource.attributes).get("service.name", ""))
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    received.append(
                        ReceivedSpan(
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                            name=span.name,
                            kind=KINDS.get(span.kind, str(span.kind)),
                            status=STATUSES.get(span.status.code, str(span.status.code)),
                            attributes=_attributes(span.attributes),
                            service=service,
                            scope=scope_spans.scope.name,
                            start_ns=span.start_time_unix_nano,
                        )
                    )
        self._receiver.add(received)
        return trace_service_pb2.ExportTraceServiceResponse()


class OtlpReceiver:
    """The spans received so far (thread-safe: the gRPC server answers on threads of its own)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._spans: list[ReceivedSpan] = []
        self._lock = threading.Lock()

    @property
    def endpoint(self) -> str:
        """The value of ``OTEL_EXPORTER_OTLP_ENDPOINT`` that sends here (plain text gRPC)."""
        return f"http://127.0.0.1:{self.port}"

    def add(self, spans: list[ReceivedSpan]) -> None:
        with self._lock:
            self._spans.extend(spans)

    def spans(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self._spans)

    def spans_of(self, trace_id: str) -> list[ReceivedSpan]:
        """The spans of one trace, in the order they started."""
        return sorted((s for s in self.spans() if s.trace_id == trace_id), key=lambda s: s.start_ns)

    def tree(self, trace_id: str) -> str:
        """The trace as an indented outline (``name [kind, service]``, then the tables or the
        batch size of a call and an error status), for failure messages and reports."""
        spans = self.spans_of(trace_id)
        ids = {s.span_id for s in spans}
        lines: list[str] = []

        def walk(parent: str, depth: int) -> None:
            for span in spans:
                if span.parent_id == parent or (depth == 0 and span.parent_id not in ids and parent == ""):
                    lines.append(f"{'  ' * depth}{span.name} [{span.kind}, {span.service}]{_details(span)}")
                    walk(span.span_id, depth + 1)

        walk("", 0)
        return "\n".join(lines)


def _details(span: ReceivedSpan) -> str:
    details = [
        f"{key.rsplit('.', 1)[-1]}={span.attributes[key]}"
        for key in ("aws.dynamodb.table_names", "db.operation.batch.size", "error.type")
        if key in span.attributes
    ]
    return f" {' '.join(details)}" if details else ""


@contextlib.contextmanager
def otlp_receiver() -> Iterator[OtlpReceiver]:
    """A receiver listening on a free local port until the block ends."""
    server = grpc.server(ThreadPoolExecutor(max_workers=2, thread_name_prefix="otlp-receiver"))
    port = server.add_insecure_port("127.0.0.1:0")
    receiver = OtlpReceiver(port)
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_Service(receiver), server)  # type: ignore[no-untyped-call]  # generated without annotations
    server.start()
    try:
        yield receiver
    finally:
        server.stop(None)
