"""The trace context of an event record (``graph_service.events.tracing``): a send span whose context
the record's headers carry beside the envelope's, the consumer span that continues it, and nothing
at all with tracing off."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from aiokafka.structs import RecordMetadata, TopicPartition
from opentelemetry import trace

from graph_service.events.kinds import TWEET, TweetPosted, decode, encode
from graph_service.events.record_spans import carried_context
from graph_service.events.tracing import record_tracer, traced_process, traced_send
from tests.support.span_tree import from_sdk, memory_tracer, render, the_span

TOPIC = "tweets"


class Producer:
    """``AIOKafkaProducer.send``: keeps each record's headers; acknowledged at offset 40, 41, ..."""

    def __init__(self) -> None:
        self.headers: list[list[tuple[str, bytes]]] = []

    async def send(self, topic: str, *, key: bytes, value: bytes, headers: list[tuple[str, bytes]]) -> Any:
        self.headers.append(headers)
        future: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        metadata = RecordMetadata(topic, 2, TopicPartition(topic, 2), 40 + len(self.headers) - 1, 0, 0, 0)
        asyncio.get_running_loop().call_soon(future.set_result, metadata)
        return future


@dataclass
class Consumed:
    """The fields of an aiokafka ``ConsumerRecord`` the consumer span reads."""

    topic: str
    partition: int
    offset: int
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]]


async def test_a_sent_records_context_continues_in_the_span_that_processes_it() -> None:
    tracer, exporter = memory_tracer()
    producer = Producer()
    record = encode(TweetPosted(7, 3, 1_700_000_000_000_000))
    send = traced_send(producer.send, tracer)
    with tracer.start_as_current_span("stream batch"):
        await (await send(TOPIC, key=record.key, value=record.value, headers=record.headers))
    (headers,) = producer.headers
    assert [name for name, _ in headers][:2] == ["event-type", "schema-version"]
    assert "traceparent" in dict(headers)
    assert record.headers == encode(TweetPosted(7, 3, 1_700_000_000_000_000)).headers  # the record is untouched

    seen: list[trace.SpanContext] = []

    async def handle(consumed: Consumed, note: str) -> None:
        assert note == "passed on"
        assert decode(consumed.headers, consumed.value) == TweetPosted(7, 3, 1_700_000_000_000_000)
        seen.append(trace.get_current_span().get_span_context())

    process = traced_process(handle, tracer, group="fanout")
    await process(Consumed(TOPIC, 2, 40, record.key, record.value, headers), "passed on")

    spans = from_sdk(exporter.get_finished_spans())
    batch = the_span(spans, lambda s: s.name == "stream batch", "the batch")
    sent = the_span(spans, lambda s: s.name == f"send {TOPIC}", "the send")
    processed = the_span(spans, lambda s: s.name == f"process {TOPIC}", "the processing")
    assert (sent.parent_id, processed.parent_id) == (batch.span_id, sent.span_id), render(spans)
    assert {s.trace_id for s in spans} == {batch.trace_id}
    assert dict(headers)["traceparent"].decode().startswith(f"00-{sent.trace_id}-{sent.span_id}-")
    assert (sent.kind, processed.kind) == ("producer", "consumer")
    assert sent.attributes == {
        "messaging.system": "kafka",
        "messaging.operation.type": "send",
        "messaging.operation.name": "send",
        "messaging.destination.name": TOPIC,
        "messaging.kafka.message.key": "7",
        "messaging.message.body.size": len(record.value),
        "messaging.destination.partition.id": "2",  # from the acknowledgement
        "messaging.kafka.offset": 40,
    }
    assert processed.attributes["messaging.consumer.group.name"] == "fanout"
    assert processed.attributes["messaging.kafka.offset"] == 40
    assert [f"{context.span_id:016x}" for context in seen] == [processed.span_id]  # the handler ran inside it


async def test_a_send_that_fails_ends_its_span_as_an_error() -> None:
    tracer, exporter = memory_tracer()

    async def refused(topic: str, *, key: bytes, value: bytes, headers: list[tuple[str, bytes]]) -> Any:
        future: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        future.set_exception(TimeoutError("no acknowledgement"))
        return future

    send = traced_send(refused, tracer)
    future = await send(TOPIC, key=b"1", value=b"", headers=[])
    assert isinstance(future.exception(), TimeoutError)
    await asyncio.sleep(0)  # the done callbacks run on the loop's next turn
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is trace.StatusCode.ERROR
    assert dict(span.attributes or {})["error.type"] == "TimeoutError"


async def test_a_record_without_a_context_starts_a_trace_of_its_own() -> None:
    tracer, exporter = memory_tracer()
    record = encode(TweetPosted(7, 3, 1_700_000_000_000_000))

    async def handle(consumed: Consumed) -> None:
        return None

    await traced_process(handle, tracer, group="fanout")(
        Consumed(TOPIC, 0, 1, record.key, record.value, record.headers)
    )
    (span,) = from_sdk(exporter.get_finished_spans())
    assert span.parent_id is None
    assert carried_context(record.headers) == carried_context(None)


async def test_off_the_send_and_the_handler_are_the_very_ones_given_and_no_header_is_added() -> None:
    """Without ``configure_tracing`` (the tests' process never calls it) nothing is wrapped: a record
    sent inside someone else's span still carries the envelope's two headers only."""
    assert record_tracer() is None
    producer = Producer()
    send = traced_send(producer.send, record_tracer())
    assert send == producer.send

    async def handle(consumed: Consumed) -> None:
        return None

    assert traced_process(handle, record_tracer(), group="fanout") is handle
    tracer, exporter = memory_tracer()
    record = encode(TweetPosted(7, 3, 1_700_000_000_000_000))
    with tracer.start_as_current_span("someone else's"):
        await send(TOPIC, key=record.key, value=record.value, headers=record.headers)
    assert producer.headers == [[("event-type", TWEET.event_type), ("schema-version", b"1")]]
    assert [span.name for span in exporter.get_finished_spans()] == ["someone else's"]
