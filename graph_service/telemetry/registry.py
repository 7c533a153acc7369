"""One registry per process: what its ``/metrics`` endpoint serves, build info included."""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)

from graph_service.telemetry.build_info import register_build_info

__all__ = ["process_registry"]


def process_registry() -> CollectorRegistry:
    """A fresh registry holding the standard process, Python platform and GC collectors, and
    ``socialgraph_build_info`` (``build_info.py``).

    Not the global default registry: a test process builds many runtimes, and each must report
    only its own counts (the standard collectors read the OS and are cheap to repeat).

    Also turns the ``*_created`` series off, process-wide: go-grpc-prometheus has none, and they
    would double every series for a timestamp no dashboard reads."""
    disable_created_metrics()  # type: ignore[no-untyped-call]  # prometheus_client leaves it unannotated
    registry = CollectorRegistry(auto_describe=True)
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    register_build_info(registry)
    return registry
