"""The gRPC metrics' names and labels, as go-grpc-prometheus dashboards expect them."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from graph_service.telemetry.rpc import RpcMetrics, split_method

METHOD = "/socialgraph.v1.SocialGraphService/IsFollowing"


def labels(caller: str = "", **more: str) -> dict[str, str]:
    return {
        "grpc_type": "unary",
        "grpc_service": "socialgraph.v1.SocialGraphService",
        "grpc_method": "IsFollowing",
        "caller": caller,
        **more,
    }


def test_a_full_method_splits_into_service_and_method() -> None:
    assert split_method(METHOD) == ("socialgraph.v1.SocialGraphService", "IsFollowing")
    assert split_method("/grpc.health.v1.Health/Check") == ("grpc.health.v1.Health", "Check")
    assert split_method("nonsense") == ("unknown", "nonsense")


def test_started_handled_and_the_histogram_count_per_code_and_caller() -> None:
    registry = CollectorRegistry()
    rpc = RpcMetrics(registry)
    for code, seconds in [("OK", 0.0004), ("OK", 0.003), ("INVALID_ARGUMENT", 0.2)]:
        call = rpc.of(METHOD, "feed")
        call.start()
        call.finish(code, seconds)
    value = registry.get_sample_value
    assert value("grpc_server_started_total", labels("feed")) == 3
    assert value("grpc_server_handled_total", labels("feed", grpc_code="OK")) == 2
    assert value("grpc_server_handled_total", labels("feed", grpc_code="INVALID_ARGUMENT")) == 1
    assert value("grpc_server_handled_total", labels("", grpc_code="OK")) is None
    assert value("grpc_server_handling_seconds_count", labels("feed")) == 3
    assert value("grpc_server_handling_seconds_bucket", labels("feed", le="0.0005")) == 1
    assert value("grpc_server_handling_seconds_bucket", labels("feed", le="0.005")) == 2
    assert value("grpc_server_handling_seconds_bucket", labels("feed", le="0.25")) == 3


def test_the_children_of_a_method_and_caller_are_made_once() -> None:
    rpc = RpcMetrics(CollectorRegistry())
    assert rpc.of(METHOD, "feed") is rpc.of(METHOD, "feed")
    assert rpc.of(METHOD, "feed") is not rpc.of(METHOD, "")
