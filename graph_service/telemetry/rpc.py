"""gRPC server metrics under go-grpc-prometheus's names and label values, so its dashboards and alert
rules work unchanged.

``grpc_server_started_total``, ``grpc_server_handled_total`` (with ``grpc_code``: the code as Go's
``codes.Code.String()`` writes it, ``InvalidArgument``, ``Canceled``; the table is ``GRPC_CODES``),
the ``grpc_server_handling_seconds`` histogram, and ``grpc_server_msg_received_total`` /
``grpc_server_msg_sent_total`` (messages: a unary call receives one, and sends one if it succeeds; a
stream counts each message), each by ``grpc_type`` (``unary``, ``client_stream``, ``server_stream``,
``bidi_stream``), ``grpc_service`` and ``grpc_method``, plus ``caller``: the authenticated caller's
name ("" with auth off, for open services such as health, and for calls refused before a caller was
known), as SPEC §7.1 asks.

``RpcMetrics.preinitialise`` makes the series of every method a server serves at start, under caller
"" and code ``OK``, at 0 (as go-grpc-prometheus's ``InitializeMetrics``, which also makes every other
code's: 17 times the series, for a zero no query needs), so a rate over a method never called is 0,
not empty.

The labelled children are looked up once per (method, caller) and kept: a unary call then costs
four counter increments and one histogram observation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from prometheus_client import CollectorRegistry, Counter, Histogram

__all__ = ["BUCKETS", "GRPC_CODES", "MethodMetrics", "RpcMetrics", "grpc_type", "served_methods", "split_method"]

BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Seconds; finer than Prometheus's defaults at the low end, where a cached read lands (< 1 ms)."""
_LABELS = ("grpc_type", "grpc_service", "grpc_method", "caller")

GRPC_CODES: Mapping[grpc.StatusCode, str] = MappingProxyType(
    {
        grpc.StatusCode.OK: "OK",
        grpc.StatusCode.CANCELLED: "Canceled",  # one L, as Go spells it
        grpc.StatusCode.UNKNOWN: "Unknown",
        grpc.StatusCode.INVALID_ARGUMENT: "InvalidArgument",
        grpc.StatusCode.DEADLINE_EXCEEDED: "DeadlineExceeded",
        grpc.StatusCode.NOT_FOUND: "NotFound",
        grpc.StatusCode.ALREADY_EXISTS: "AlreadyExists",
        grpc.StatusCode.PERMISSION_DENIED: "PermissionDenied",
        grpc.StatusCode.RESOURCE_EXHAUSTED: "ResourceExhausted",
        grpc.StatusCode.FAILED_PRECONDITION: "FailedPrecondition",
        grpc.StatusCode.ABORTED: "Aborted",
        grpc.StatusCode.OUT_OF_RANGE: "OutOfRange",
        grpc.StatusCode.UNIMPLEMENTED: "Unimplemented",
        grpc.StatusCode.INTERNAL: "Internal",
        grpc.StatusCode.UNAVAILABLE: "Unavailable",
        grpc.StatusCode.DATA_LOSS: "DataLoss",
        grpc.StatusCode.UNAUTHENTICATED: "Unauthenticated",
    }
)
"""Each status code -> its ``grpc_code`` label value: Go's ``codes.Code.String()``, which
go-grpc-prometheus writes (written out, not derived from the Python names: ``CANCELLED`` is
``Canceled``)."""


def split_method(full_method: str) -> tuple[str, str]:
    """``/pkg.Service/Method`` -> (``pkg.Service``, ``Method``); anything else -> ("unknown", itself)."""
    service, sep, name = full_method.lstrip("/").rpartition("/")
    return (service, name) if sep and service else ("unknown", full_method)


def grpc_type(request_streaming: bool, response_streaming: bool) -> str:
    """go-grpc-prometheus's ``grpc_type`` of a method that streams requests and/or responses."""
    if request_streaming:
        return "bidi_stream" if response_streaming else "client_stream"
    return "server_stream" if response_streaming else "unary"


def served_methods(services: Iterable[ServiceDescriptor]) -> list[tuple[str, str]]:
    """(``/pkg.Service/Method``, ``grpc_type``) of every method of ``services``."""
    return [
        (f"/{service.full_name}/{method.name}", grpc_type(method.client_streaming, method.server_streaming))
        for service in services
        for method in service.methods
    ]


class MethodMetrics:
    """The children of one (method, caller): ``start()`` when a call begins, ``received()`` and
    ``sent()`` per message, ``finish()`` when it ends."""

    def __init__(self, rpc: RpcMetrics, labels: tuple[str, str, str, str]) -> None:
        self._labels = labels
        self._handled_family = rpc.handled
        self._started = rpc.started.labels(*labels)
        self._seconds = rpc.handling_seconds.labels(*labels)
        self._received = rpc.msg_received.labels(*labels)
        self._sent = rpc.msg_sent.labels(*labels)
        self._handled: dict[grpc.StatusCode, Counter] = {}

    def start(self) -> None:
        self._started.inc()

    def received(self) -> None:
        self._received.inc()

    def sent(self) -> None:
        self._sent.inc()

    def handled(self, code: grpc.StatusCode) -> Counter:
        """The ``grpc_server_handled_total`` child of ``code`` (made, at 0, on first use)."""
        handled = self._handled.get(code)
        if handled is None:
            handled = self._handled[code] = self._handled_family.labels(*self._labels, GRPC_CODES[code])
        return handled

    def finish(self, code: grpc.StatusCode, seconds: float) -> None:
        self.handled(code).inc()
        self._seconds.observe(seconds)


class RpcMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.started = Counter("grpc_server_started", "RPCs started on the server.", _LABELS, registry=registry)
        self.handled = Counter(
            "grpc_server_handled",
            "RPCs completed on the server, by status code (as go-grpc-prometheus writes it).",
            (*_LABELS, "grpc_code"),
            registry=registry,
        )
        self.handling_seconds = Histogram(
            "grpc_server_handling_seconds",
            "Time from the call's arrival at the server to its answer (seconds).",
            _LABELS,
            buckets=BUCKETS,
            registry=registry,
        )
        self.msg_received = Counter(
            "grpc_server_msg_received", "Messages received by the server.", _LABELS, registry=registry
        )
        self.msg_sent = Counter("grpc_server_msg_sent", "Messages sent by the server.", _LABELS, registry=registry)
        self._bound: dict[tuple[str, str, str], MethodMetrics] = {}

    def of(self, full_method: str, caller: str, grpc_type: str = "unary") -> MethodMetrics:
        """The metrics of calls of ``full_method`` (``/pkg.Service/Method``) by ``caller``."""
        key = (full_method, caller, grpc_type)
        found = self._bound.get(key)
        if found is None:
            service, name = split_method(full_method)
            found = self._bound[key] = MethodMetrics(self, (grpc_type, service, name, caller))
        return found

    def preinitialise(self, methods: Iterable[tuple[str, str]]) -> None:
        """Every series of each (``/pkg.Service/Method``, ``grpc_type``) at 0, under caller "" and,
        for ``grpc_server_handled_total``, code ``OK`` (``served_methods`` lists a server's)."""
        for full_method, kind in methods:
            self.of(full_method, "", kind).handled(grpc.StatusCode.OK)
