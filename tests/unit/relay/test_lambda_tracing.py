"""The relay Lambda's spans: one for the Lambda event's batch of stream records, a send span per
event produced under it, each record carrying its send span's context."""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka.structs import RecordMetadata, TopicPartition

from graph_service.events.kafka import topic_names
from relay.lambda_batches import RelayBatches
from relay.sources import SOURCES
from tests.support.span_tree import from_sdk, memory_tracer, render
from tests.unit.relay.test_lambda_batches import SETTINGS, tweet_record


class Producer:
    """Keeps each record's headers; acknowledges at once."""

    def __init__(self) -> None:
        self.headers: list[dict[str, bytes]] = []

    async def send(self, topic: str, *, key: bytes, value: bytes, headers: list[tuple[str, bytes]]) -> Any:
        self.headers.append(dict(headers))
        future: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        future.set_result(RecordMetadata(topic, 0, TopicPartition(topic, 0), len(self.headers), 0, 0, 0))
        return future


async def test_a_lambda_batch_is_a_span_with_a_send_span_per_event_each_in_its_records_headers() -> None:
    tracer, exporter = memory_tracer("relay")
    producer = Producer()
    topics = topic_names(SETTINGS)
    sources = {SETTINGS.table(s.table): (topics[s.topic], s.convert) for s in SOURCES}
    batches = RelayBatches(producer, sources, tracer=tracer)  # a Producer for the AIOKafkaProducer
    assert await batches.produce({"Records": [tweet_record(11, 1), tweet_record(12, 2)]}) == {
        "records": 2,
        "produced": 2,
        "skipped": 0,
    }
    spans = from_sdk(exporter.get_finished_spans())
    assert render(spans) == "\n".join(
        [
            "process p_tweets stream  (consumer, relay)",
            "├── send tweets  (producer, relay)",
            "└── send tweets  (producer, relay)",
        ]
    )
    sends = sorted((s for s in spans if s.kind == "producer"), key=lambda s: s.start_ns)
    assert [headers["traceparent"].decode().split("-")[1:3] for headers in producer.headers] == [
        [s.trace_id, s.span_id] for s in sends
    ]
    assert [s.attributes["messaging.kafka.message.key"] for s in sends] == ["11", "12"]
