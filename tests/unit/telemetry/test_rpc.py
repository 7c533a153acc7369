"""The gRPC metrics' names, labels and label values, as go-grpc-prometheus dashboards and rules expect them."""

from __future__ import annotations

import grpc
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2
from prometheus_client import CollectorRegistry
from socialgraph.v1 import social_graph_pb2

from graph_service.telemetry.rpc import GRPC_CODES, RpcMetrics, grpc_type, served_methods, split_method

METHOD = "/socialgraph.v1.SocialGraphService/IsFollowing"
GO_CODE_NAMES = [
    "OK",
    "Canceled",
    "Unknown",
    "InvalidArgument",
    "DeadlineExceeded",
    "NotFound",
    "AlreadyExists",
    "PermissionDenied",
    "ResourceExhausted",
    "FailedPrecondition",
    "Aborted",
    "OutOfRange",
    "Unimplemented",
    "Internal",
    "Unavailable",
    "DataLoss",
    "Unauthenticated",
]
"""Go's ``codes.Code.String()`` by code number (google.golang.org/grpc/codes/code_string.go)."""


def labels(caller: str = "", **more: str) -> dict[str, str]:
    return {
        "grpc_type": "unary",
        "grpc_service": "socialgraph.v1.SocialGraphService",
        "grpc_method": "IsFollowing",
        "caller": caller,
        **more,
    }


def test_every_status_code_is_written_as_go_writes_it() -> None:
    """All 17 codes, by number: ``Canceled`` with one L, ``InvalidArgument``, never ``INVALID_ARGUMENT``."""
    assert len(grpc.StatusCode) == 17
    assert {code.value[0]: GRPC_CODES[code] for code in grpc.StatusCode} == dict(enumerate(GO_CODE_NAMES))


def test_a_full_method_splits_into_service_and_method() -> None:
    assert split_method(METHOD) == ("socialgraph.v1.SocialGraphService", "IsFollowing")
    assert split_method("/grpc.health.v1.Health/Check") == ("grpc.health.v1.Health", "Check")
    assert split_method("nonsense") == ("unknown", "nonsense")


def test_the_grpc_type_of_each_kind_of_method() -> None:
    assert [grpc_type(a, b) for a, b in [(False, False), (True, False), (False, True), (True, True)]] == [
        "unary",
        "client_stream",
        "server_stream",
        "bidi_stream",
    ]


def test_started_handled_the_messages_and_the_histogram_count_per_code_and_caller() -> None:
    registry = CollectorRegistry()
    rpc = RpcMetrics(registry)
    for code, seconds in [(grpc.StatusCode.OK, 0.0004), (grpc.StatusCode.OK, 0.003), (grpc.StatusCode.CANCELLED, 0.2)]:
        call = rpc.of(METHOD, "feed")
        call.start()
        call.received()
        call.finish(code, seconds)
        if code is grpc.StatusCode.OK:
            call.sent()
    value = registry.get_sample_value
    assert value("grpc_server_started_total", labels("feed")) == 3
    assert value("grpc_server_handled_total", labels("feed", grpc_code="OK")) == 2
    assert value("grpc_server_handled_total", labels("feed", grpc_code="Canceled")) == 1
    assert value("grpc_server_handled_total", labels("", grpc_code="OK")) is None
    assert value("grpc_server_msg_received_total", labels("feed")) == 3
    assert value("grpc_server_msg_sent_total", labels("feed")) == 2
    assert value("grpc_server_handling_seconds_count", labels("feed")) == 3
    assert value("grpc_server_handling_seconds_bucket", labels("feed", le="0.0005")) == 1
    assert value("grpc_server_handling_seconds_bucket", labels("feed", le="0.005")) == 2
    assert value("grpc_server_handling_seconds_bucket", labels("feed", le="0.25")) == 3


def test_the_children_of_a_method_and_caller_are_made_once() -> None:
    rpc = RpcMetrics(CollectorRegistry())
    assert rpc.of(METHOD, "feed") is rpc.of(METHOD, "feed")
    assert rpc.of(METHOD, "feed") is not rpc.of(METHOD, "")


def test_the_methods_of_services_come_from_their_descriptors_with_their_kind() -> None:
    services = [
        social_graph_pb2.DESCRIPTOR.services_by_name["SocialGraphService"],
        health_pb2.DESCRIPTOR.services_by_name["Health"],
        reflection_pb2.DESCRIPTOR.services_by_name["ServerReflection"],
    ]
    methods = dict(served_methods(services))
    assert methods[METHOD] == "unary"
    assert methods["/grpc.health.v1.Health/Check"] == "unary"
    assert methods["/grpc.health.v1.Health/Watch"] == "server_stream"
    assert methods["/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"] == "bidi_stream"
    assert len(methods) == sum(len(service.methods) for service in services)


def test_preinitialised_series_are_zero_under_no_caller_and_code_ok_only() -> None:
    """Every series of a method never called exists at 0, so a rate over it is 0, not empty."""
    registry = CollectorRegistry()
    rpc = RpcMetrics(registry)
    rpc.preinitialise([(METHOD, "unary"), ("/grpc.health.v1.Health/Watch", "server_stream")])
    value = registry.get_sample_value
    for name in ("started", "msg_received", "msg_sent"):
        assert value(f"grpc_server_{name}_total", labels()) == 0, name
    assert value("grpc_server_handled_total", labels(grpc_code="OK")) == 0
    assert value("grpc_server_handling_seconds_count", labels()) == 0
    assert value("grpc_server_handling_seconds_bucket", labels(le="+Inf")) == 0
    watch = {
        "grpc_type": "server_stream",
        "grpc_service": "grpc.health.v1.Health",
        "grpc_method": "Watch",
        "caller": "",
    }
    assert value("grpc_server_handled_total", {**watch, "grpc_code": "OK"}) == 0
    handled_codes = {s.labels["grpc_code"] for m in registry.collect() for s in m.samples if "grpc_code" in s.labels}
    assert handled_codes == {"OK"}
