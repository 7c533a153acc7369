"""The gRPC server: health, reflection, graceful shutdown on SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import signal
from dataclasses import dataclass

import grpc
import structlog
from grpc_health.v1 import _async as health_aio
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc
from socialgraph.v1 import timeline_pb2, timeline_pb2_grpc

from graph_service.bootstrap import build_service, build_timeline_service
from graph_service.interceptors import RequestInterceptor
from graph_service.servicer import SocialGraphServicer
from graph_service.settings import DEV_PAGE_TOKEN_SECRET, Settings
from graph_service.store.edge_store import EdgeStore
from graph_service.timeline.service import TimelineService
from graph_service.timeline.servicer import TimelineServicer

__all__ = ["PortInUse", "RunningServer", "serve", "start_server"]

log = structlog.get_logger(__name__)
SERVICE_NAME = pb.DESCRIPTOR.services_by_name["SocialGraphService"].full_name
TIMELINE_SERVICE_NAME = timeline_pb2.DESCRIPTOR.services_by_name["TimelineService"].full_name


class PortInUse(RuntimeError):
    """The listen address could not be bound."""


@dataclass
class RunningServer:
    server: grpc.aio.Server
    health: health_aio.HealthServicer
    store: EdgeStore
    timeline: TimelineService
    port: int
    grace: float

    async def stop(self) -> None:
        """Health NOT_SERVING -> stop accepting -> drain in-flight calls -> close adapters."""
        await self.health.enter_graceful_shutdown()
        await self.server.stop(self.grace)
        await self.timeline.close()
        await self.store.close()
        log.info("server_stopped")


async def start_server(settings: Settings) -> RunningServer:
    service, store = build_service(settings)
    timeline = build_timeline_service(settings, store)
    # SO_REUSEPORT off: a second server on a taken port must fail, not share it silently.
    server = grpc.aio.server(interceptors=[RequestInterceptor()], options=[("grpc.so_reuseport", 0)])
    pb_grpc.add_SocialGraphServiceServicer_to_server(SocialGraphServicer(service), server)
    timeline_pb2_grpc.add_TimelineServiceServicer_to_server(TimelineServicer(timeline), server)
    health_servicer = health_aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        [SERVICE_NAME, TIMELINE_SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME], server
    )
    try:
        port = server.add_insecure_port(settings.grpc_address)
    except RuntimeError as exc:
        await timeline.close()
        await store.close()
        raise PortInUse(f"cannot listen on {settings.grpc_address}: {exc}") from exc
    if port == 0:
        await timeline.close()
        await store.close()
        raise PortInUse(f"cannot listen on {settings.grpc_address}: address in use or not available")
    await server.start()
    for name in (SERVICE_NAME, ""):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    timelines_served = timeline.has_timelines  # without Redis every GetHomeTimeline is UNAVAILABLE
    await health_servicer.set(
        TIMELINE_SERVICE_NAME,
        health_pb2.HealthCheckResponse.SERVING if timelines_served else health_pb2.HealthCheckResponse.NOT_SERVING,
    )
    if settings.page_token_secret == DEV_PAGE_TOKEN_SECRET and not settings.dynamodb_endpoint:
        log.warning("development_page_token_secret", hint="set SG_PAGE_TOKEN_SECRET: tokens can be forged")
    log.info("server_started", address=settings.grpc_address, port=port)
    return RunningServer(server, health_servicer, store, timeline, port, settings.shutdown_grace_seconds)


async def serve(settings: Settings) -> None:
    """Run until SIGTERM or SIGINT, then shut down gracefully."""
    running = await start_server(settings)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    try:
        await stopping.wait()
        log.info("shutdown_requested")
    finally:
        await running.stop()
