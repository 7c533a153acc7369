"""The server span of each RPC (``graph_service/api/tracing.py``), on a grpc.aio server in the test
process with the per-call interceptor inside it, spans kept by an in-memory exporter: the caller's
``traceparent`` continued, the RPC conventions' name and attributes, the status by code, the
request ID, the request's own spans and log lines inside it; gRPC's own services untraced."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import pytest
import structlog
from grpc_health.v1 import _async as health_aio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from graph_service.api.interceptors import RequestInterceptor
from graph_service.api.server import tracing_interceptor
from graph_service.api.tracing import TracingInterceptor, peer_attributes
from graph_service.domain.errors import Blocked, Unavailable
from tests.support.polling import eventually

SERVICE = "socialgraph.v1.SocialGraphService"
Handler = Callable[[bytes, Any], Awaitable[bytes]]


SEEN: list[tuple[object, trace.SpanContext]] = []
"""What the servicer saw: the request ID bound to its log lines, and the span current then."""
TRACERS: dict[str, trace.Tracer] = {}
"""The tracer the servicer makes its child span with (the test's provider)."""


async def follow(request: bytes, context: Any) -> bytes:
    """Stands for the servicer: a child span (as a DynamoDB call makes) in the request's log context."""
    with TRACERS["child"].start_as_current_span("DynamoDB.TransactWriteItems"):
        pass
    SEEN.append(
        (structlog.contextvars.get_contextvars().get("request_id"), trace.get_current_span().get_span_context())
    )
    return b""


async def refuse(request: bytes, context: Any) -> bytes:
    raise Blocked(1, 2)


async def unavailable(request: bytes, context: Any) -> bytes:
    raise Unavailable("DynamoDB TransactWriteItems: ThrottlingException")


async def broken(request: bytes, context: Any) -> bytes:
    raise RuntimeError("a bug")


HANDLERS: dict[str, Handler] = {"Follow": follow, "Block": refuse, "Unblock": unavailable, "Mute": broken}


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
async def address(exporter: InMemorySpanExporter) -> AsyncIterator[str]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    traced = TracingInterceptor(provider.get_tracer("graph_service.api"))
    server = grpc.aio.server(interceptors=[traced, RequestInterceptor()])
    handlers = {name: grpc.unary_unary_rpc_method_handler(handler) for name, handler in HANDLERS.items()}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    health_pb2_grpc.add_HealthServicer_to_server(health_aio.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    traced.serving_on("127.0.0.1", port)
    await server.start()
    TRACERS["child"] = provider.get_tracer("test")
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(None)


async def call(address: str, method: str, metadata: tuple[tuple[str, str], ...] = ()) -> grpc.StatusCode:
    async with grpc.aio.insecure_channel(address) as channel:
        try:
            same = bytes  # the raw bytes, both ways
            await channel.unary_unary(f"/{SERVICE}/{method}", same, same)(b"", metadata=metadata, timeout=5)
        except grpc.aio.AioRpcError as error:
            return error.code()
    return grpc.StatusCode.OK


async def server_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    """The server spans, once one has ended: the caller may have its answer before the server's
    interceptor ends the span."""

    async def finished() -> list[ReadableSpan]:
        return [span for span in exporter.get_finished_spans() if span.kind is SpanKind.SERVER]

    return await eventually(finished, bool, timeout=5)


async def test_the_span_continues_the_callers_traceparent_with_the_rpc_conventions(
    address: str, exporter: InMemorySpanExporter
) -> None:
    trace_id, parent_id = os.urandom(16).hex(), os.urandom(8).hex()
    metadata = (("traceparent", f"00-{trace_id}-{parent_id}-01"), ("x-request-id", "req-7"))
    SEEN.clear()
    assert await call(address, "Follow", metadata) is grpc.StatusCode.OK
    (span,) = await server_spans(exporter)
    assert span.name == f"{SERVICE}/Follow"
    assert format(span.context.trace_id, "032x") == trace_id
    assert span.parent is not None
    assert span.parent.is_remote
    assert format(span.parent.span_id, "016x") == parent_id
    attributes = dict(span.attributes or {})
    assert {k: v for k, v in attributes.items() if not k.startswith("network.peer.")} == {
        "rpc.system": "grpc",
        "rpc.service": SERVICE,
        "rpc.method": "Follow",
        "rpc.grpc.status_code": 0,
        "server.address": "127.0.0.1",
        "server.port": int(address.rsplit(":", 1)[1]),
        "socialgraph.request_id": "req-7",
    }
    assert attributes["network.peer.address"] == "127.0.0.1"
    assert span.status.status_code is StatusCode.UNSET
    (child,) = [s for s in exporter.get_finished_spans() if s.name == "DynamoDB.TransactWriteItems"]
    assert child.parent is not None
    assert child.parent.span_id == span.context.span_id
    # The per-call interceptor runs inside the span: the request's log context is the span's.
    assert [("req-7", span.context)] == SEEN


async def test_without_a_traceparent_the_span_starts_a_trace_and_names_the_request_id_made_up(
    address: str, exporter: InMemorySpanExporter
) -> None:
    assert await call(address, "Follow") is grpc.StatusCode.OK
    (span,) = await server_spans(exporter)
    assert span.parent is None
    request_id = dict(span.attributes or {})["socialgraph.request_id"]
    assert isinstance(request_id, str)
    assert len(request_id) == 32


async def test_a_call_its_caller_did_not_sample_is_not_recorded_but_its_context_flows_on(
    address: str, exporter: InMemorySpanExporter
) -> None:
    trace_id = os.urandom(16).hex()
    SEEN.clear()
    metadata = (("traceparent", f"00-{trace_id}-{os.urandom(8).hex()}-00"),)
    assert await call(address, "Follow", metadata) is grpc.StatusCode.OK
    assert exporter.get_finished_spans() == ()  # neither the server span nor its child
    ((_, context),) = SEEN
    assert format(context.trace_id, "032x") == trace_id  # what the log lines carry


@pytest.mark.parametrize(
    ("method", "code", "status"),
    [
        ("Block", grpc.StatusCode.FAILED_PRECONDITION, StatusCode.UNSET),  # an answer, not the server's fault
        ("Unblock", grpc.StatusCode.UNAVAILABLE, StatusCode.ERROR),
        ("Mute", grpc.StatusCode.INTERNAL, StatusCode.ERROR),
    ],
)
async def test_the_status_code_is_recorded_and_only_a_servers_fault_is_an_error(
    address: str, exporter: InMemorySpanExporter, method: str, code: grpc.StatusCode, status: StatusCode
) -> None:
    assert await call(address, method) is code
    (span,) = await server_spans(exporter)
    attributes = dict(span.attributes or {})
    assert attributes["rpc.grpc.status_code"] == code.value[0]
    assert span.status.status_code is status
    assert attributes.get("error.type") == (code.name if status is StatusCode.ERROR else None)


async def test_health_checks_make_no_span(address: str, exporter: InMemorySpanExporter) -> None:
    async with grpc.aio.insecure_channel(address) as channel:
        await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
    assert exporter.get_finished_spans() == ()


def test_with_tracing_off_the_server_gets_no_tracing_interceptor() -> None:
    assert tracing_interceptor() is None


@pytest.mark.parametrize(
    ("peer", "expected"),
    [
        ("ipv4:127.0.0.1:50123", {"network.peer.address": "127.0.0.1", "network.peer.port": 50123}),
        ("ipv6:[::1]:50123", {"network.peer.address": "::1", "network.peer.port": 50123}),
        ("unix:/tmp/socket", {}),
    ],
)
def test_the_callers_address_is_read_from_grpcs_peer_string(peer: str, expected: dict[str, object]) -> None:
    assert peer_attributes(peer) == expected
