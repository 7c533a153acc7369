"""The span of a stream batch (``graph_service.streams.tracing``), as the stream reader of every
consumer makes it: one per batch handled, what the handler does nested under it, nothing when off."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from graph_service.streams.reader import StreamReader
from graph_service.streams.tracing import stream_tracer, table_of_arn, traced_handler
from tests.support.polling import eventually
from tests.support.span_tree import from_sdk, memory_tracer, render
from tests.unit.streams.test_reader import FakeCheckpoints, FakeLeases, FakeShard, FakeStream, Handler

ARN = "arn:aws:dynamodb:ddblocal:000000000000:table/p_followers/stream/2024-06-10T09:12:41.137"


async def test_each_batch_the_reader_hands_over_is_a_span_with_the_handlers_work_under_it() -> None:
    tracer, exporter = memory_tracer()
    stream = FakeStream(a=FakeShard())
    stream.append("a", 2)
    table = FakeCheckpoints()
    handler = Handler(table, "reader")

    async def handle(shard_id: str, records: list[dict[str, Any]], committed: str | None) -> str | None:
        with tracer.start_as_current_span("the handler's write"):  # as a DynamoDB call's span would be
            return await handler(shard_id, records, committed)

    reader = StreamReader(
        stream,  # type: ignore[arg-type]  # a FakeStream for the AsyncDynamo
        ARN,
        table,  # type: ignore[arg-type]  # FakeCheckpoints for the CheckpointStore
        handle,
        leases=FakeLeases(table, "reader"),  # type: ignore[arg-type]  # for the ShardLeases
        poll_seconds=0.01,
        refresh_seconds=0.1,
        tracer=tracer,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(reader.run(stop))
    try:
        await eventually(lambda: asyncio.sleep(0, len(handler.seen)), lambda n: n == 2)
    finally:
        stop.set()
        await task
    spans = from_sdk(exporter.get_finished_spans())
    assert render(spans) == "\n".join(
        [
            "process p_followers stream  (consumer, test)",
            "└── the handler's write  (internal, test)",
        ]
    )
    batch = next(span for span in spans if span.kind == "consumer")
    assert batch.attributes == {
        "messaging.system": "aws_dynamodb_streams",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": "p_followers",
        "messaging.destination.partition.id": "a",
        "messaging.consumer.group.name": "test",
        "messaging.batch.message_count": 2,
    }


async def test_a_batch_that_fails_ends_its_span_as_an_error() -> None:
    tracer, exporter = memory_tracer()

    async def failing(shard_id: str, records: list[dict[str, Any]], committed: str | None) -> str | None:
        raise ConnectionError("DynamoDB unreachable")

    handle = traced_handler(failing, tracer, table="p_tweets", consumer="relay:tweets")
    with contextlib.suppress(ConnectionError):
        await handle("a", [{}], None)
    (span,) = exporter.get_finished_spans()
    assert not span.status.is_ok
    assert [event.name for event in span.events] == ["exception"]


def test_off_the_handler_is_the_very_one_given() -> None:
    assert stream_tracer() is None  # the tests' process never configures tracing

    async def handle(shard_id: str, records: list[dict[str, Any]], committed: str | None) -> str | None:
        return None

    assert traced_handler(handle, stream_tracer(), table="p_tweets", consumer="relay:tweets") is handle


def test_the_table_of_a_stream_arn() -> None:
    assert table_of_arn(ARN) == "p_followers"
    assert table_of_arn("arn") == "arn"  # not a stream's: named as it is
