"""The gRPC server: both services, health, reflection, and the graceful stop.

It is given the services ready-made (``graph_service/entrypoints/server.py`` builds them); it binds,
starts, reports health, and on ``stop()`` goes NOT_SERVING, stops accepting and drains.
"""

from __future__ import annotations

from dataclasses import dataclass

import grpc
import structlog
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
from graph_service.telemetry.limits import LimitMetrics
from graph_service.telemetry.rpc import RpcMetrics

__all__ = ["SERVICE_NAME", "TIMELINE_SERVICE_NAME", "GrpcServer", "PortInUse", "start_grpc_server"]

log = structlog.get_logger(__name__)
SERVICE_NAME = pb.DESCRIPTOR.services_by_name["SocialGraphService"].full_name
TIMELINE_SERVICE_NAME = timeline_pb2.DESCRIPTOR.services_by_name["TimelineService"].full_name


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
    whose parent checked that the port was free; only then is SO_REUSEPORT on."""
    interceptor = RequestInterceptor(authenticator, metrics=metrics, limits=limits)
    # SO_REUSEPORT off: a second server on a taken port must fail, not share it silently.
    server = grpc.aio.server(interceptors=[interceptor], options=[("grpc.so_reuseport", int(shared_port))])
    pb_grpc.add_SocialGraphServiceServicer_to_server(SocialGraphServicer(graph), server)
    timeline_pb2_grpc.add_TimelineServiceServicer_to_server(TimelineServicer(timeline), server)
    health_servicer = health_aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        [SERVICE_NAME, TIMELINE_SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME], server
    )
    try:
        port = (
            server.add_insecure_port(address) if credentials is None else server.add_secure_port(address, credentials)
        )
    except RuntimeError as exc:
        raise PortInUse(f"cannot listen on {address}: {exc}") from exc
    if port == 0:
        raise PortInUse(f"cannot listen on {address}: address in use or not available")
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
