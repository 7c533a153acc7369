"""``serve``'s gRPC series as go-grpc-prometheus makes them, scraped from a real server: every method of
every service the server lists through reflection has its series at 0 before any call (a rate over
it is 0, not empty), a unary call receives and sends one message, and the streams (health's Watch,
reflection) are counted per message and by the code they end with."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import descriptor_pool
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc

from graph_service.settings import Settings
from tests.support.polling import eventually
from tests.support.runtimes import running_server
from tests.support.scrape import Scrape, scrape

SERIES = ("grpc_server_started_total", "grpc_server_msg_received_total", "grpc_server_msg_sent_total")
REFLECTION = "grpc.reflection.v1alpha.ServerReflection"


async def listed_services(channel: grpc.aio.Channel) -> list[str]:
    """The services the server lists through reflection (one ``list_services`` request on a stream)."""
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    call = stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
    replies = [reply async for reply in call]
    assert await call.code() == grpc.StatusCode.OK
    return [service.name for reply in replies for service in reply.list_services_response.service]


def of(service: str, method: str, kind: str = "unary") -> dict[str, str]:
    return {"grpc_type": kind, "grpc_service": service, "grpc_method": method, "caller": ""}


async def test_every_served_method_has_zero_series_before_any_call_and_a_unary_call_counts_its_messages(
    settings: Settings,
) -> None:
    async with running_server(settings) as server, grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        before = await scrape(server.metrics_port)
        services = await listed_services(channel)
        stub = pb_grpc.SocialGraphServiceStub(channel)
        await stub.IsFollowing(pb.IsFollowingRequest(follower_id=1, followee_id=2))
        with pytest.raises(grpc.aio.AioRpcError, match="INVALID_ARGUMENT"):
            await stub.Follow(pb.FollowRequest(follower_id=0, followee_id=2))
        after = await scrape(server.metrics_port)

    assert {"socialgraph.v1.SocialGraphService", "socialgraph.v1.TimelineService", "grpc.health.v1.Health"} <= set(
        services
    )
    assert REFLECTION in services
    pool = descriptor_pool.Default()
    methods = [(service, method) for service in services for method in pool.FindServiceByName(service).methods]
    assert {("socialgraph.v1.TimelineService", "GetHomeTimeline"), ("grpc.health.v1.Health", "Watch")} <= {
        (service, method.name) for service, method in methods
    }
    for service, method in methods:
        kind = {(False, False): "unary", (False, True): "server_stream", (True, True): "bidi_stream"}[
            (method.client_streaming, method.server_streaming)
        ]
        labels = of(service, method.name, kind)
        for name in SERIES:
            assert before.value(name, **labels) == 0, (name, labels)
        assert before.value("grpc_server_handled_total", **labels, grpc_code="OK") == 0, labels
        assert before.value("grpc_server_handling_seconds_count", **labels) == 0, labels
    is_following = of("socialgraph.v1.SocialGraphService", "IsFollowing")
    follow = of("socialgraph.v1.SocialGraphService", "Follow")
    assert [after.value(name, **is_following) for name in SERIES] == [1, 1, 1]
    assert [after.value(name, **follow) for name in SERIES] == [1, 1, 0]  # no reply to an invalid request
    assert after.value("grpc_server_handled_total", **follow, grpc_code="InvalidArgument") == 1
    assert after.value("grpc_server_handled_total", **follow, grpc_code="OK") == 0
    assert after.value("grpc_server_handled_total", **of(REFLECTION, "ServerReflectionInfo", "bidi_stream")) == 1


async def test_streams_count_each_message_and_the_code_they_end_with(settings: Settings) -> None:
    """A reflection stream of two requests: two messages each way, OK. A health watch cancelled by
    its caller after its first answer: one message each way, ``Canceled`` (one L)."""
    async with running_server(settings) as server, grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
        requests = [reflection_pb2.ServerReflectionRequest(list_services="") for _ in range(2)]
        replies = [
            reply
            async for reply in reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo(iter(requests))
        ]
        assert len(replies) == 2
        watch = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=""))
        first = await watch.read()
        assert first.status == health_pb2.HealthCheckResponse.SERVING
        watch.cancel()
        watched = of("grpc.health.v1.Health", "Watch", "server_stream")

        def ended(metrics: Scrape) -> bool:
            return metrics.value("grpc_server_handled_total", **watched, grpc_code="Canceled") == 1

        metrics = await eventually(lambda: scrape(server.metrics_port), ended)  # the server hears of it a little later

    reflected = of(REFLECTION, "ServerReflectionInfo", "bidi_stream")
    assert [metrics.value(name, **reflected) for name in SERIES] == [1, 2, 2]
    assert metrics.value("grpc_server_handled_total", **reflected, grpc_code="OK") == 1
    assert metrics.value("grpc_server_handling_seconds_count", **reflected) == 1
    assert [metrics.value(name, **watched) for name in SERIES] == [1, 1, 1]
    assert metrics.value("grpc_server_handled_total", **watched, grpc_code="OK") == 0
    assert metrics.value("grpc_server_handling_seconds_count", **watched) == 1
