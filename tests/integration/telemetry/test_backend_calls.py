"""Each DynamoDB and Redis call on the real servers: timed and counted by operation and error
(``telemetry/backend_calls.py``) always, and a CLIENT span of the caller's span when traced
(``dynamodb/observed.py``, ``redis_client/observed.py``), named and described by OpenTelemetry's
conventions, with no key or value recorded."""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, EndpointConnectionError
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode, Tracer
from prometheus_client import CollectorRegistry
from redis.exceptions import NoScriptError, ResponseError
from socialgraph_devstack.processes import free_port

from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.observed import CallObserver, table_names
from graph_service.redis_client.connect import build_redis
from graph_service.redis_client.observed import ObservedCluster, ObservedRedis, RedisObserver
from graph_service.redis_client.packed import evalsha_calls
from graph_service.settings import Settings
from graph_service.telemetry.backend_calls import DynamoCallMetrics, RedisCallMetrics

SECRET = "secret-value-7"
"""A key and value the calls use: it must appear in no span attribute."""


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def tracer(exporter: InMemorySpanExporter) -> Tracer:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("test")


def children(exporter: InMemorySpanExporter, parent: str = "rpc") -> list[ReadableSpan]:
    """The finished spans whose parent is the span named ``parent``, in the order they ended."""
    spans = exporter.get_finished_spans()
    (root,) = [span for span in spans if span.name == parent]
    return [span for span in spans if span.parent is not None and span.parent.span_id == root.context.span_id]


def no_secrets(spans: list[ReadableSpan]) -> bool:
    return not any(SECRET in str(value) for span in spans for value in (span.attributes or {}).values())


def counted(registry: CollectorRegistry, backend: str, operation: str) -> float | None:
    return registry.get_sample_value(f"socialgraph_{backend}_call_seconds_count", {"operation": operation})


def errors(registry: CollectorRegistry, backend: str, operation: str, error: str) -> float | None:
    labels = {"operation": operation, "error": error}
    return registry.get_sample_value(f"socialgraph_{backend}_call_errors_total", labels)


# -- DynamoDB ---------------------------------------------------------------------------------


def dynamo(endpoint: str, metrics: DynamoCallMetrics, tracer: Tracer | None) -> AsyncDynamo:
    config = Config(retries={"mode": "standard", "max_attempts": 1}, connect_timeout=2)
    client = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1", config=config)
    return AsyncDynamo(client, ThreadPoolExecutor(2), CallObserver(client, metrics, tracer))


@pytest.fixture(scope="module")
def table(dynamodb_local: str) -> Iterator[str]:
    name = f"calls{os.urandom(4).hex()}"
    client = boto3.client("dynamodb", endpoint_url=dynamodb_local, region_name="us-east-1")
    client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    yield name
    client.delete_table(TableName=name)


def put(table: str) -> dict[str, Any]:
    item = {"pk": {"S": SECRET}}
    return {
        "TransactItems": [
            {"Put": {"TableName": table, "Item": item, "ConditionExpression": "attribute_not_exists(pk)"}}
        ]
    }


async def test_a_dynamodb_call_is_a_client_span_of_the_callers_span_on_the_pool_thread(
    dynamodb_local: str, table: str, tracer: Tracer, exporter: InMemorySpanExporter
) -> None:
    registry = CollectorRegistry()
    store = dynamo(dynamodb_local, DynamoCallMetrics(registry), tracer)
    with tracer.start_as_current_span("rpc"):
        await store.call("transact_write_items", **put(table))
        with pytest.raises(ClientError):  # the same item again: its condition fails
            await store.call("transact_write_items", **put(table))
        await store.call("get_item", TableName=table, Key={"pk": {"S": SECRET}})
    store.close()
    written, refused, read = children(exporter)
    assert [s.name for s in (written, refused, read)] == [
        "DynamoDB.TransactWriteItems",
        "DynamoDB.TransactWriteItems",
        "DynamoDB.GetItem",
    ]
    assert {span.kind for span in (written, refused, read)} == {SpanKind.CLIENT}
    attributes = dict(written.attributes or {})
    assert attributes.pop("aws.request_id")
    assert attributes == {
        "rpc.system": "aws-api",
        "rpc.service": "DynamoDB",
        "rpc.method": "TransactWriteItems",
        "db.system": "dynamodb",
        "aws.dynamodb.table_names": (table,),
        "server.address": "127.0.0.1",
        "server.port": int(dynamodb_local.rsplit(":", 1)[1]),
        "cloud.region": "us-east-1",
    }
    assert written.status.status_code is StatusCode.UNSET
    assert refused.status.status_code is StatusCode.UNSET  # a refused condition is an answer, not a failure
    assert dict(refused.attributes or {})["error.type"] == "TransactionCanceledException"
    assert no_secrets([written, refused, read])
    assert counted(registry, "dynamodb", "TransactWriteItems") == 2
    assert counted(registry, "dynamodb", "GetItem") == 1
    assert errors(registry, "dynamodb", "TransactWriteItems", "TransactionCanceledException") == 1


async def test_untraced_dynamodb_calls_make_no_span_and_are_counted_all_the_same(
    dynamodb_local: str, table: str, exporter: InMemorySpanExporter
) -> None:
    registry = CollectorRegistry()
    metrics = DynamoCallMetrics(registry)
    store = dynamo(dynamodb_local, metrics, None)
    await store.call("get_item", TableName=table, Key={"pk": {"S": "absent"}})
    unreachable = dynamo(f"http://127.0.0.1:{free_port()}", metrics, None)
    with pytest.raises(Exception) as failed:  # noqa: PT011 - AsyncDynamo wraps it: the metric names botocore's
        await unreachable.call("get_item", TableName=table, Key={"pk": {"S": "absent"}})
    assert isinstance(failed.value.__cause__, EndpointConnectionError)
    store.close()
    unreachable.close()
    assert exporter.get_finished_spans() == ()
    assert counted(registry, "dynamodb", "GetItem") == 2
    assert errors(registry, "dynamodb", "GetItem", "EndpointConnectionError") == 1


async def test_a_call_outside_any_span_makes_no_root_span_of_its_own_even_with_tracing_on(
    dynamodb_local: str, table: str, tracer: Tracer, exporter: InMemorySpanExporter
) -> None:
    """A consumer's stream polls and lease renewals run outside any span: as root spans they would be
    most of what it exports, one trace per poll."""
    registry = CollectorRegistry()
    store = dynamo(dynamodb_local, DynamoCallMetrics(registry), tracer)
    await store.call("get_item", TableName=table, Key={"pk": {"S": "absent"}})
    store.close()
    assert exporter.get_finished_spans() == ()
    assert counted(registry, "dynamodb", "GetItem") == 1


def test_the_tables_a_call_names_are_read_from_every_form_of_request() -> None:
    assert table_names({"TableName": "a"}) == ("a",)
    assert table_names({"RequestItems": {"b": {}, "a": {}}}) == ("a", "b")
    transact = [{"Put": {"TableName": "b"}}, {"Update": {"TableName": "a"}}, {"ConditionCheck": {"TableName": "b"}}]
    assert table_names({"TransactItems": transact}) == ("a", "b")
    assert table_names({"Statement": "SELECT"}) == ()


# -- Redis ------------------------------------------------------------------------------------


def observed(client: ObservedRedis | ObservedCluster, url: str, registry: CollectorRegistry, tracer: Tracer) -> None:
    client.observer = RedisObserver(url, RedisCallMetrics(registry), tracer)


async def test_redis_commands_pipelines_scripts_and_packed_batches_are_spans_of_the_caller(
    redis_url: str, tracer: Tracer, exporter: InMemorySpanExporter
) -> None:
    registry = CollectorRegistry()
    client = build_redis(redis_url, cluster=False, settings=Settings())
    assert isinstance(client, ObservedRedis)
    observed(client, redis_url, registry, tracer)
    script = client.register_script("return redis.call('GET', KEYS[1])")
    with tracer.start_as_current_span("rpc"):
        await client.set(SECRET, SECRET)
        pipe = client.pipeline(transaction=False)
        pipe.get(SECRET)
        pipe.exists(SECRET)
        pipe.ttl(SECRET)
        assert await pipe.execute() == [SECRET, 1, -1]
        assert await script(keys=[SECRET]) == SECRET  # NOSCRIPT, SCRIPT LOAD, EVALSHA again
        assert await evalsha_calls(client, script.sha, [([SECRET], []), ([SECRET], [])]) == [SECRET, SECRET]
        with pytest.raises(ResponseError):
            await client.lpush(SECRET, "x")  # WRONGTYPE
    await client.ping()  # outside any span: counted, no span
    await client.aclose()
    spans = children(exporter)
    assert [(s.name, s.status.status_code) for s in spans] == [
        ("SET", StatusCode.UNSET),
        ("PIPELINE", StatusCode.UNSET),
        ("EVALSHA", StatusCode.UNSET),  # NOSCRIPT: answered (error.type), loaded and run again at once
        ("SCRIPT LOAD", StatusCode.UNSET),
        ("EVALSHA", StatusCode.UNSET),
        ("PIPELINE", StatusCode.UNSET),  # the packed script calls: one write, two commands
        ("LPUSH", StatusCode.ERROR),
    ]
    assert len(exporter.get_finished_spans()) == len(spans) + 1
    port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    assert dict(spans[0].attributes or {}) == {
        "db.system": "redis",
        "db.operation.name": "SET",
        "db.namespace": "0",
        "server.address": "127.0.0.1",
        "server.port": port,
    }
    assert [dict(s.attributes or {}).get("db.operation.batch.size") for s in spans if s.name == "PIPELINE"] == [3, 2]
    assert dict(spans[2].attributes or {})["error.type"] == NoScriptError.__name__
    assert {s.kind for s in spans} == {SpanKind.CLIENT}
    assert no_secrets(spans)
    assert counted(registry, "redis", "PING") == 1
    assert counted(registry, "redis", "PIPELINE") == 2
    assert errors(registry, "redis", "EVALSHA", "NoScriptError") == 1
    assert errors(registry, "redis", "LPUSH", "ResponseError") == 1


@pytest.mark.cluster
async def test_redis_cluster_commands_and_pipelines_are_spans_of_the_caller(
    redis_cluster: list[int], tracer: Tracer, exporter: InMemorySpanExporter
) -> None:
    registry = CollectorRegistry()
    url = f"redis://127.0.0.1:{redis_cluster[0]}"
    client = build_redis(url, cluster=True, settings=replace(Settings(), redis_cluster=True))
    assert isinstance(client, ObservedCluster)
    observed(client, url, registry, tracer)
    key = f"calls:{os.urandom(4).hex()}"
    with tracer.start_as_current_span("rpc"):
        await client.set(key, "1")
        pipe = client.pipeline()
        pipe.get(key)
        pipe.incr(key)
        assert await pipe.execute() == ["1", 2]
    await client.aclose()
    spans = children(exporter)
    assert [s.name for s in spans] == ["SET", "PIPELINE"]
    assert dict(spans[1].attributes or {})["db.operation.batch.size"] == 2
    assert counted(registry, "redis", "SET") == 1
    assert counted(registry, "redis", "PIPELINE") == 1
