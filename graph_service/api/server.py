"""The gRPC server: both services, health, reflection, and the graceful stop.

It is given the services ready-made (``graph_service/entrypoints/server.py`` builds them); it binds,
starts, reports health, and on ``stop()`` goes NOT_SERVING, stops accepting and drains.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import grpc
import structlog
from google.protobuf import descriptor_pool
from grpc_health.v1 import _async as health_aio
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc
from socialgraph.v1 import timeline_pb2, timeline_pb2_grpc

from graph_service.api.auth import Authenticator
from graph_service.api.interceptors import RequestInterceptor
from graph_service.api.servicer import SocialGraphServicer
from graph_service.api.timeline_servicer import TimelineServicer
from graph_service.domain.listening import PortInUse
from graph_service.rules.graph import GraphRules
from graph_service.rules.home_timeline import HomeTimeline
from graph_service.telemetry import tracing
from graph_service.telemetry.limits import LimitMetrics
from graph_service.telemetry.rpc import RpcMetrics, served_methods

if TYPE_CHECKING:
    from graph_service.api.tracing import TracingInterceptor

__all__ = [
    "KEEPALIVE",
    "SERVICE_NAME",
    "TIMELINE_SERVICE_NAME",
    "GrpcServer",
    "PortInUse",
    "start_grpc_server",
    "tracing_interceptor",
]

log = structlog.get_logger(__name__)
SERVICE_NAME = pb.DESCRIPTOR.services_by_name["SocialGraphService"].full_name
TIMELINE_SERVICE_NAME = timeline_pb2.DESCRIPTOR.services_by_name["TimelineService"].full_name
SERVED = (SERVICE_NAME, TIMELINE_SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME)
"""Every service the server registers, as reflection lists them (and their metrics start at 0)."""


def tracing_interceptor() -> TracingInterceptor | None:
    """The server span's interceptor when this process's tracing is on; None (nothing installed,
    nor ``api/tracing.py`` imported) when it is off."""
    if not tracing.enabled():
        return None
    from graph_service.api.tracing import TracingInterceptor

    return TracingInterceptor(tracing.tracer("graph_service.api"))


KEEPALIVE = (
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 15_000),
)
"""Accept the keepalive pings of long-lived internal channels, idle ones included: the Python client
pings every 30 s (``socialgraph_client.channel``). gRPC's default refuses pings without calls more
often than every 5 minutes and ends such a connection with GOAWAY ``too_many_pings``; 15 s leaves
room for the client's timer jitter and for other clients pinging every 20 s or more."""


@dataclass
class GrpcServer:
    server: grpc.aio.Server
    health: health_aio.HealthServicer
    port: int
    grace: float
    serving: bool = True
    """What ``/readyz`` reports: health says SERVING (False from the start of ``stop``)."""

    async def stop(self) -> None:
        """Health NOT_SERVING -> stop accepting -> drain in-flight calls (up to ``grace`` seconds)."""
        self.serving = False
        await self.health.enter_graceful_shutdown()
        await self.server.stop(self.grace)


async def start_grpc_server(
    address: str,
    graph: GraphRules,
    timeline: HomeTimeline,
    *,
    grace_seconds: float,
    credentials: grpc.ServerCredentials | None = None,
    authenticator: Authenticator | None = None,
    metrics: RpcMetrics | None = None,
    limits: LimitMetrics | None = None,
    shared_port: bool = False,
) -> GrpcServer:
    """Serve both services on ``address`` (TLS with ``credentials``; callers checked by
    ``authenticator``, else open; calls counted in ``metrics``, limit refusals in ``limits``);
    ``PortInUse`` if it cannot be bound. ``shared_port``: one of ``SG_SERVE_PROCESSES`` processes,
    whose parent checked that the port was free; only then is SO_REUSEPORT on. Every method of
    ``SERVED`` has its series in ``metrics`` from the start, at 0."""
    if metrics is not None:
        metrics.preinitialise(served_methods(descriptor_pool.Default().FindServiceByName(name) for name in SERVED))
    interceptors: list[Any] = [RequestInterceptor(authenticator, metrics=metrics, limits=limits)]
    traced = tracing_interceptor()
    if traced is not None:
        interceptors.insert(0, traced)  # outermost: the request's log lines are inside its span
    # SO_REUSEPORT off: a second server on a taken port must fail, not share it silently.
    server = grpc.aio.server(interceptors=interceptors, options=[("grpc.so_reuseport", int(shared_port)), *KEEPALIVE])
    pb_grpc.add_SocialGraphServiceServicer_to_server(SocialGraphServicer(graph), server)
    timeline_pb2_grpc.add_TimelineServiceServicer_to_server(TimelineServicer(timeline), server)
    health_servicer = health_aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(SERVED, server)
    try:
        port = (
            server.add_insecure_port(address) if credentials is None else server.add_secure_port(address, credentials)
        )
    except RuntimeError as exc:
        raise PortInUse(f"cannot listen on {address}: {exc}") from exc
    if port == 0:
        raise PortInUse(f"cannot listen on {address}: address in use or not available")
    if traced is not None:
        traced.serving_on(address.rpartition(":")[0], port)
    await server.start()
    for name in (SERVICE_NAME, ""):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    # Without Redis every GetHomeTimeline is UNAVAILABLE: say so to health checks.
    serving = (
        health_pb2.HealthCheckResponse.SERVING if timeline.has_timelines else health_pb2.HealthCheckResponse.NOT_SERVING
    )
    await health_servicer.set(TIMELINE_SERVICE_NAME, serving)
    log.info("server_started", address=address, port=port, tls=credentials is not None, auth=authenticator is not None)
    return GrpcServer(server, health_servicer, port, grace_seconds)
