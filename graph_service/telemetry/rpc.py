"""gRPC server metrics under go-grpc-prometheus's names, so its dashboards work unchanged.

``grpc_server_started_total``, ``grpc_server_handled_total`` (with ``grpc_code``, the status code's
name) and the ``grpc_server_handling_seconds`` histogram, each by ``grpc_type``, ``grpc_service`` and
``grpc_method``, plus ``caller``: the authenticated caller's name ("" with auth off, for open
services such as health, and for calls refused before a caller was known), as SPEC §7.1 asks.

The labelled children are looked up once per (method, caller) and kept: a call then costs two
counter increments and one histogram observation.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

__all__ = ["BUCKETS", "MethodMetrics", "RpcMetrics", "split_method"]

BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""Seconds; finer than Prometheus's defaults at the low end, where a cached read lands (< 1 ms)."""
_LABELS = ("grpc_type", "grpc_service", "grpc_method", "caller")


def split_method(full_method: str) -> tuple[str, str]:
    """``/pkg.Service/Method`` -> (``pkg.Service``, ``Method``); anything else -> ("unknown", itself)."""
    service, sep, name = full_method.lstrip("/").rpartition("/")
    return (service, name) if sep and service else ("unknown", full_method)


class MethodMetrics:
    """The children of one (method, caller): ``start()`` when a call begins, ``finish()`` when it ends."""

    def __init__(self, rpc: RpcMetrics, labels: tuple[str, str, str, str]) -> None:
        self._labels = labels
        self._handled_family = rpc.handled
        self._started = rpc.started.labels(*labels)
        self._seconds = rpc.handling_seconds.labels(*labels)
        self._handled: dict[str, Counter] = {}

    def start(self) -> None:
        self._started.inc()

    def finish(self, code: str, seconds: float) -> None:
        """``code``: the status code's name (``OK``, ``INVALID_ARGUMENT``, ...)."""
        handled = self._handled.get(code)
        if handled is None:
            handled = self._handled[code] = self._handled_family.labels(*self._labels, code)
        handled.inc()
        self._seconds.observe(seconds)


class RpcMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.started = Counter("grpc_server_started", "RPCs started on the server.", _LABELS, registry=registry)
        self.handled = Counter(
            "grpc_server_handled",
            "RPCs completed on the server, by status code name.",
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
        self._bound: dict[tuple[str, str, str], MethodMetrics] = {}

    def of(self, full_method: str, caller: str, grpc_type: str = "unary") -> MethodMetrics:
        """The metrics of calls of ``full_method`` (``/pkg.Service/Method``) by ``caller``."""
        key = (full_method, caller, grpc_type)
        found = self._bound.get(key)
        if found is None:
            service, name = split_method(full_method)
            found = self._bound[key] = MethodMetrics(self, (grpc_type, service, name, caller))
        return found
