"""One ``Follow`` traced end to end: a real ``serve`` exporting over OTLP/gRPC to a receiver in the
test continues the caller's ``traceparent`` in its server span, whose children are the call's
DynamoDB and Redis calls, every log line of the call carries the trace and span IDs, and the calls
are counted in serve's /metrics."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import grpc
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc

from graph_service.settings import Settings
from tests.support.children import Child, serve_process
from tests.support.otlp_receiver import ReceivedSpan, otlp_receiver

FOLLOW = "socialgraph.v1.SocialGraphService/Follow"


def lines_of(child: Child, request_id: str) -> list[dict[str, Any]]:
    """The JSON log lines ``serve`` wrote for the call with ``request_id``."""
    found = []
    for line in child.log_path.read_text(errors="replace").splitlines():
        if request_id in line:
            entry = json.loads(line)
            if entry.get("request_id") == request_id:
                found.append(entry)
    return found


def ancestors(span: ReceivedSpan, spans: list[ReceivedSpan]) -> list[str]:
    by_id = {s.span_id: s for s in spans}
    chain = []
    while span.parent_id in by_id:
        span = by_id[span.parent_id]
        chain.append(span.span_id)
    return chain


async def test_a_follow_is_one_trace_continuing_the_callers_with_its_dynamodb_and_redis_calls(
    settings: Settings, tmp_path: Path
) -> None:
    trace_id, caller_span = os.urandom(16).hex(), os.urandom(8).hex()
    request_id = f"traced-{os.urandom(4).hex()}"
    with otlp_receiver() as receiver:
        async with serve_process(
            settings,
            tmp_path,
            OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
            # Nothing leaves before the stop (a batch leaves at 512 spans or after a minute): the
            # spans below are the ones SIGTERM exported.
            OTEL_BSP_SCHEDULE_DELAY="60000",
            SG_LOG_LEVEL="debug",  # the access line of a successful call is at debug
        ) as serve:
            async with grpc.aio.insecure_channel(serve.address) as channel:
                stub = pb_grpc.SocialGraphServiceStub(channel)
                # A first follow, a trace of its own, loads the cache's scripts: the traced one is a steady-state call.
                await stub.Follow(pb.FollowRequest(follower_id=10, followee_id=12), timeout=10)
                await stub.Follow(
                    pb.FollowRequest(follower_id=11, followee_id=12),
                    metadata=(("traceparent", f"00-{trace_id}-{caller_span}-01"), ("x-request-id", request_id)),
                    timeout=10,
                )
            metrics = await serve.metrics()  # the calls' metrics, in serve's own registry
            assert receiver.spans() == []
        # serve has stopped (SIGTERM): what it held is exported by now.
        assert serve.process.returncode == 0, serve.log()
        spans = receiver.spans_of(trace_id)
        lines = lines_of(serve, request_id)
        print(f"\nspans of one Follow:\n{receiver.tree(trace_id)}")  # the tree, for the record (-s)

    (server,) = [s for s in spans if s.name == FOLLOW]
    assert (server.kind, server.parent_id, server.service) == ("SERVER", caller_span, "socialgraph-serve")
    assert server.status == "UNSET"
    assert {k: server.attributes[k] for k in ("rpc.system", "rpc.service", "rpc.method", "rpc.grpc.status_code")} == {
        "rpc.system": "grpc",
        "rpc.service": "socialgraph.v1.SocialGraphService",
        "rpc.method": "Follow",
        "rpc.grpc.status_code": 0,
    }
    assert server.attributes["socialgraph.request_id"] == request_id
    assert server.attributes["server.port"] == serve.port

    dynamodb = [s for s in spans if s.name.startswith("DynamoDB.")]
    redis = [s for s in spans if s.attributes.get("db.system") == "redis"]
    assert redis, receiver.tree(trace_id)
    for span in dynamodb + redis:
        assert span.kind == "CLIENT"
        assert server.span_id in ancestors(span, spans), receiver.tree(trace_id)
    writes = [s for s in dynamodb if s.attributes["rpc.method"] == "TransactWriteItems"]
    assert writes, receiver.tree(trace_id)
    assert writes[0].attributes["rpc.system"] == "aws-api"
    assert all(name.startswith(settings.table_prefix) for name in writes[0].attributes["aws.dynamodb.table_names"])
    assert all(s.attributes["db.operation.name"] == s.name for s in redis)

    assert (metrics.value("socialgraph_dynamodb_call_seconds_count", operation="TransactWriteItems") or 0) >= 2
    assert (metrics.value("socialgraph_redis_call_seconds_count", operation="PIPELINE") or 0) >= 2

    access = [line for line in lines if line["event"] == "rpc"]
    assert access, lines
    assert all(line["trace_id"] == trace_id for line in lines), lines
    assert access[0]["span_id"] == server.span_id
