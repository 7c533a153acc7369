"""What a caller sees, and what the log gets, when a call cannot be served for reasons the caller is
not told in detail: a body that is not a protobuf of the RPC's request type, or the store or Redis
out of reach. The caller gets a code, a reason and a fixed sentence; the log gets the detail, in a
few JSON lines however many calls there were, and never a traceback."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import grpc
import pytest
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc
from socialgraph.v1 import timeline_pb2 as tpb
from socialgraph.v1 import timeline_pb2_grpc as tpb_grpc
from socialgraph_devstack.processes import free_port

from graph_service.api.interceptors import REQUEST_ID_HEADER
from graph_service.entrypoints.server import ServerRuntime
from tests.support.graph_calls import error_info
from tests.support.logs import capture_every_level
from tests.support.runtimes import make_settings, running_server
from tests.support.scrape import scrape

GRAPH = "/socialgraph.v1.SocialGraphService/"
METHODS = [
    f"{GRAPH}Follow",
    f"{GRAPH}IsFollowing",
    f"{GRAPH}ListFollowers",
    f"{GRAPH}BatchGetCounts",
    f"{GRAPH}SuggestFollows",
    "/socialgraph.v1.TimelineService/GetHomeTimeline",
]
GARBAGE = [
    b"\xff\xff\xff",  # a field tag whose varint never ends
    b"\x0a\x05ab",  # a length-delimited field cut short
    b"\x08",  # a varint field with no value
]
BAD_UTF8 = b"\x1a\x01\xff"  # ListFollowers' page_token (field 3), a string, that is not UTF-8
INTERNAL_NAMES = ("DecodeError", "google.", "protobuf.", "class ", "<", "Error parsing", "Traceback", "socialgraph.v1.")


def raw_call(channel: grpc.aio.Channel, method: str) -> Any:
    """``method`` with no serializer on either side: the test sends and gets bytes as they are."""
    return channel.unary_unary(method, request_serializer=None, response_deserializer=None)


@pytest.fixture
async def channel(server: ServerRuntime) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as value:
        yield value


def assert_no_internals(message: str) -> None:
    for name in INTERNAL_NAMES:
        assert name not in message, message


async def test_an_undecodable_body_is_invalid_argument_malformed_request(
    server: ServerRuntime, channel: grpc.aio.Channel
) -> None:
    """Every RPC answers bytes that are no protobuf of its request type with INVALID_ARGUMENT /
    MALFORMED_REQUEST, a fixed sentence naming nothing inside the server, and the call's request
    ID, as any refused call; and the call is counted under INVALID_ARGUMENT."""
    cases = [(method, body) for method in METHODS for body in GARBAGE] + [(f"{GRAPH}ListFollowers", BAD_UTF8)]
    for method, body in cases:
        call = raw_call(channel, method)(body, metadata=((REQUEST_ID_HEADER, "malformed-1"),))
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        error = caught.value
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, (method, body, error.details())
        assert error_info(error).reason == "MALFORMED_REQUEST"
        assert_no_internals(error.details() or "")
        assert dict(await call.initial_metadata())[REQUEST_ID_HEADER] == "malformed-1"
        assert dict(await call.trailing_metadata())[REQUEST_ID_HEADER] == "malformed-1"
    counted = (await scrape(server.metrics_port)).value(
        "grpc_server_handled_total", grpc_method="IsFollowing", grpc_code="InvalidArgument"
    )
    assert counted == len(GARBAGE)


async def test_a_flood_of_malformed_calls_is_a_few_log_lines_and_no_traceback(
    server: ServerRuntime, channel: grpc.aio.Channel, caplog: pytest.LogCaptureFixture
) -> None:
    """Two hundred malformed calls at the service's default level (info) write one rate-limited
    warning with the count, however many the calls: grpc's logger writes nothing, no traceback."""
    caplog.set_level(logging.INFO)
    calls = 200
    with capture_every_level() as logs:
        for batch in range(calls // 50):
            results = await asyncio.gather(
                *(raw_call(channel, METHODS[(batch + i) % len(METHODS)])(GARBAGE[i % len(GARBAGE)]) for i in range(50)),
                return_exceptions=True,
            )
            assert all(isinstance(r, grpc.aio.AioRpcError) for r in results)
        # A well-formed call still works on the same connection.
        reply = await raw_call(channel, f"{GRAPH}IsFollowing")(
            pb.IsFollowingRequest(follower_id=1, followee_id=2).SerializeToString()
        )
        assert pb.IsFollowingResponse.FromString(reply).following is False
    shown = [e for e in logs if e["log_level"] not in ("debug",)]
    malformed = [e for e in shown if e["event"] == "malformed_request"]
    assert 1 <= len(malformed) <= 2, shown  # one per 10 s interval; a slow machine may cross one
    assert malformed[0]["kind"] == "MALFORMED_REQUEST"
    assert "bytes" in malformed[0]["error"]
    assert len(shown) == len(malformed), shown
    assert "exception" not in str(logs)
    assert "Traceback" not in str(logs)
    assert [r for r in caplog.records if r.name.startswith("grpc")] == []
    assert not any(r.exc_info for r in caplog.records)


def nothing_listens() -> tuple[str, str]:
    """A free port on loopback (nobody listens: connections are refused at once), as URL and port."""
    port = str(free_port())
    return f"http://127.0.0.1:{port}", port


async def test_an_outage_tells_callers_nothing_of_the_endpoints() -> None:
    """DynamoDB and Redis out of reach: callers get STORE_UNAVAILABLE / TIMELINE_UNAVAILABLE with a
    fixed sentence; the endpoints, ports and library text go to the log, one line per reason."""
    store_url, store_port = nothing_listens()
    redis_port = str(free_port())
    settings = make_settings(store_url, f"redis://127.0.0.1:{redis_port}/0", redis_timeout_seconds=0.25)
    started = time.monotonic()
    with capture_every_level() as logs:
        async with running_server(settings) as server, grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            stub = pb_grpc.SocialGraphServiceStub(channel)
            timelines = tpb_grpc.TimelineServiceStub(channel)
            calls: Sequence[tuple[Any, str]] = [
                (stub.GetCounts(pb.GetCountsRequest(user_id=1)), "STORE_UNAVAILABLE"),
                (stub.Follow(pb.FollowRequest(follower_id=1, followee_id=2)), "STORE_UNAVAILABLE"),
                (timelines.GetHomeTimeline(tpb.GetHomeTimelineRequest(user_id=1)), "TIMELINE_UNAVAILABLE"),
            ]
            for call, reason in calls:
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await call
                error = caught.value
                assert error.code() == grpc.StatusCode.UNAVAILABLE, error.details()
                assert error_info(error).reason == reason
                text = error.details() or ""
                assert "unavailable" in text
                for secret in (store_url, store_port, redis_port, "127.0.0.1", "SG_", "Error"):
                    assert secret not in text, text
    print(f"outage calls took {time.monotonic() - started:.1f} s")
    details = {e["kind"]: e["error"] for e in logs if e["event"] in ("store_unavailable", "timeline_unavailable")}
    assert store_port in details["STORE_UNAVAILABLE"]
    assert redis_port in details["TIMELINE_UNAVAILABLE"]
