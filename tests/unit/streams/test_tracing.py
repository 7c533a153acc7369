"""The span of a stream batch (``graph_service.streams.tracing``), as the stream reader of every
consumer makes it: one per batch handled, what the handler does nested under it, nothing when off."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from opentelemetry.trace import Tracer

from graph_service.streams.reader import RecordHandler, ShardReset, StreamReader
from graph_service.streams.tracing import stream_tracer, table_of_arn, traced_handler
from tests.support.polling import eventually
from tests.support.span_tree import from_sdk, memory_tracer, render
from tests.unit.streams.test_reader import FakeCheckpoints, FakeLeases, FakeShard, FakeStream, Handler

ARN = "arn:aws:dynamodb:ddblocal:000000000000:table/p_followers/stream/2024-06-10T09:12:41.137"


async def read_until(
    records: int, table: FakeCheckpoints, handle: RecordHandler, tracer: Tracer, done: Callable[[], int]
) -> None:
    """A reader of one shard holding ``records`` records, traced by ``tracer``, run until ``done()``
    is at least 1 (what the test waits for), then stopped."""
    stream = FakeStream(a=FakeShard())
    stream.append("a", records)
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
        await eventually(lambda: asyncio.sleep(0, done()), lambda n: n >= 1)
    finally:
        stop.set()
        await task


async def test_each_batch_the_reader_hands_over_is_a_span_with_the_handlers_work_under_it() -> None:
    tracer, exporter = memory_tracer()
    table = FakeCheckpoints()
    handler = Handler(table, "reader")

    async def handle(shard_id: str, records: list[dict[str, Any]], committed: str | None) -> str | None:
        with tracer.start_as_current_span("the handler's write"):  # as a DynamoDB call's span would be
            return await handler(shard_id, records, committed)

    await read_until(2, table, handle, tracer, lambda: len(handler.seen) // 2)
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


async def test_a_batch_whose_shard_moved_elsewhere_is_an_outcome_not_an_error() -> None:
    """``ShardReset`` (another consumer moved the checkpoint: the reader reads again) ends the span
    with ``error.type`` only, as the reader's handler makes it."""
    tracer, exporter = memory_tracer()

    async def moved(shard_id: str, records: list[dict[str, Any]], committed: str | None) -> str | None:
        raise ShardReset(shard_id)

    await read_until(1, FakeCheckpoints(), moved, tracer, lambda: len(exporter.get_finished_spans()))
    span = exporter.get_finished_spans()[0]
    assert span.status.is_unset
    assert dict(span.attributes or {})["error.type"] == "ShardReset"
    assert list(span.events) == []
