"""What the per-call interceptor does with failures a caller is told only in a fixed sentence: a body
that does not decode (grpc's deserializer would raise before any handler) and an unavailable store
or Redis. The caller gets code, reason and the sentence; the log gets the detail, rate-limited."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import pytest
import structlog
from google.rpc import error_details_pb2, status_pb2
from prometheus_client import CollectorRegistry
from socialgraph.v1 import social_graph_pb2 as pb

from graph_service.api.auth import Authenticator
from graph_service.api.callers import CallerTable, caller_entry, mint_token
from graph_service.api.interceptors import RequestInterceptor
from graph_service.domain.errors import MalformedRequest, TimelineUnavailable, Unavailable
from graph_service.telemetry.failures import FailureLog
from graph_service.telemetry.rpc import RpcMetrics
from tests.support.logs import capture_every_level
from tests.support.servicer_context import CallDetails, ServicerContext

FOLLOW = "/socialgraph.v1.SocialGraphService/Follow"
GARBAGE = b"\xff\xff\xff"
TOKEN = mint_token()
Handler = Callable[[Any, Any], Awaitable[Any]]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def reason_of(status: grpc.Status) -> str:
    rich = status_pb2.Status.FromString(dict(status.trailing_metadata)["grpc-status-details-bin"])
    info = error_details_pb2.ErrorInfo()
    assert rich.details[0].Unpack(info)
    assert info.domain == "socialgraph.v1"
    reason: str = info.reason
    return reason


async def wrap(interceptor: RequestInterceptor, handler: Handler | None = None) -> grpc.RpcMethodHandler[Any, Any]:
    """The interceptor's handler for Follow around ``handler`` (or one that must not run)."""

    async def never(request: Any, context: Any) -> Any:
        raise AssertionError("the handler ran for a malformed request")

    async def continuation(details: Any) -> grpc.RpcMethodHandler[Any, Any]:
        return grpc.unary_unary_rpc_method_handler(
            handler or never,
            request_deserializer=pb.FollowRequest.FromString,
            response_serializer=pb.FollowResponse.SerializeToString,
        )

    return await interceptor.intercept_service(continuation, CallDetails(FOLLOW))


async def answer(wrapped: grpc.RpcMethodHandler[Any, Any], body: bytes, context: ServicerContext) -> grpc.Status:
    """What gRPC does with a call: decode the body with the handler's deserializer, then run it."""
    assert wrapped.request_deserializer is not None
    request = wrapped.request_deserializer(body)
    behaviour: Any = wrapped.unary_unary  # grpc-stubs type it for the sync server's context
    with pytest.raises(grpc.aio.AbortError):
        await behaviour(request, context)
    assert context.status is not None
    return context.status


async def test_the_deserializer_never_raises_and_still_decodes_good_bodies() -> None:
    """gRPC calls the deserializer before any handler, where a raise is UNKNOWN plus a traceback:
    garbage becomes a MalformedRequest carrying the size and the runtime's words, for the log."""
    wrapped = await wrap(RequestInterceptor())
    assert wrapped.request_deserializer is not None
    good = pb.FollowRequest(follower_id=1, followee_id=2)
    assert wrapped.request_deserializer(good.SerializeToString()) == good
    bad = wrapped.request_deserializer(GARBAGE)
    assert isinstance(bad, MalformedRequest)
    assert str(bad).startswith("3 bytes: ")


async def test_a_malformed_body_is_invalid_argument_with_a_fixed_sentence_and_counted() -> None:
    """The handler never runs; the caller gets INVALID_ARGUMENT / MALFORMED_REQUEST and a sentence
    naming nothing inside the server; the call is counted under InvalidArgument."""
    registry = CollectorRegistry()
    status = await answer(await wrap(RequestInterceptor(metrics=RpcMetrics(registry))), GARBAGE, ServicerContext())
    assert status.code == grpc.StatusCode.INVALID_ARGUMENT
    assert reason_of(status) == "MALFORMED_REQUEST"
    assert status.details == MalformedRequest.public_message
    for internal in ("DecodeError", "protobuf", "class", "Error parsing", "FollowRequest"):
        assert internal not in status.details
    labels = {
        "grpc_type": "unary",
        "grpc_service": "socialgraph.v1.SocialGraphService",
        "grpc_method": "Follow",
        "caller": "",
        "grpc_code": "InvalidArgument",
    }
    assert registry.get_sample_value("grpc_server_handled_total", labels) == 1


async def test_the_caller_is_checked_before_the_body() -> None:
    """With auth on, a stranger's malformed body is UNAUTHENTICATED (it learns nothing of the
    request format, and is not logged as malformed); a known caller's is MALFORMED_REQUEST."""
    interceptor = RequestInterceptor(Authenticator(CallerTable.parse(caller_entry("feed", ["write"], TOKEN))))
    with capture_every_level() as logs:
        stranger = await answer(await wrap(interceptor), GARBAGE, ServicerContext())
    assert stranger.code == grpc.StatusCode.UNAUTHENTICATED
    assert [e for e in logs if e["event"] == "malformed_request"] == []
    with capture_every_level() as logs:
        known = await answer(await wrap(interceptor), GARBAGE, ServicerContext((("authorization", f"Bearer {TOKEN}"),)))
    assert reason_of(known) == "MALFORMED_REQUEST"
    assert [e["caller"] for e in logs if e["event"] == "malformed_request"] == ["feed"]


async def test_a_flood_of_malformed_calls_is_one_warning_per_interval_with_a_count() -> None:
    """A hundred malformed calls write one warning at once and one per interval after, with the
    count; each call's access line is debug (off at the default level), and no traceback."""
    clock = Clock()
    interceptor = RequestInterceptor(failures=FailureLog(structlog.get_logger("test"), clock=clock))
    wrapped = await wrap(interceptor)
    with capture_every_level() as logs:
        for _ in range(100):
            await answer(wrapped, GARBAGE, ServicerContext())
        clock.now += 10
        await answer(wrapped, GARBAGE, ServicerContext())
    shown = [e for e in logs if e["log_level"] != "debug"]
    assert [(e["event"], e["count"]) for e in shown] == [("malformed_request", 1), ("malformed_request", 100)]
    assert shown[0]["kind"] == "MALFORMED_REQUEST"
    assert shown[0]["error"].startswith("3 bytes: ")
    assert shown[0]["method"] == FOLLOW
    assert {e["event"] for e in logs if e["log_level"] == "debug"} == {"rpc"}
    assert not any("exc_info" in e or "exception" in e for e in logs)


async def test_an_outage_tells_the_caller_a_sentence_and_the_log_the_detail_by_kind() -> None:
    """STORE_UNAVAILABLE and TIMELINE_UNAVAILABLE answer with their fixed sentence, never the
    endpoint; the detail is logged once per reason per interval, each reason on its own."""
    detail = 'DynamoDB query: Could not connect to the endpoint URL: "http://10.1.2.3:8000/"'
    errors = [Unavailable(detail), Unavailable(detail), TimelineUnavailable("Redis did not answer: 10.1.2.3:6379")]
    clock = Clock()
    interceptor = RequestInterceptor(failures=FailureLog(structlog.get_logger("test"), clock=clock))
    with capture_every_level() as logs:
        for error in errors:

            async def failing(request: Any, context: Any, error: Exception = error) -> Any:
                raise error

            status = await answer(await wrap(interceptor, failing), b"", ServicerContext())
            assert status.code == grpc.StatusCode.UNAVAILABLE
            assert "10.1.2.3" not in status.details
            assert status.details in (Unavailable.public_message, TimelineUnavailable.public_message)
    details = [(e["kind"], e["error"]) for e in logs if e["event"].endswith("_unavailable")]
    assert details == [("STORE_UNAVAILABLE", detail), ("TIMELINE_UNAVAILABLE", str(errors[2]))]
    assert [e["outcome"] for e in logs if e["event"] == "rpc" and e["log_level"] == "info"] == [
        "STORE_UNAVAILABLE",
        "STORE_UNAVAILABLE",
        "TIMELINE_UNAVAILABLE",
    ]
