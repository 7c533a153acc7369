"""The relay's work on one AWS Lambda event of a DynamoDB Streams trigger (``tweets`` or ``followers``).

Lambda keeps the shard position itself, one batch of a shard at a time, and delivers a failed batch
again; so there is no checkpoint here: convert every record, produce every event (acks=all), wait
until Kafka acknowledged all of them, and only then return. Any failure raises, and Lambda retries
the batch: delivery is at least once, as with the ``socialgraph relay`` process, and the fanout's
merge makes a repeat harmless. One function may take the triggers of both tables: each record's
``eventSourceARN`` names its table, hence its topic and converter (its ``relay.sources.Source``).
The handler (building the producer, and the table -> topic map from the settings, once per
container) is ``graph_service.entrypoints.relay_lambda.handler``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import structlog
from aiokafka import AIOKafkaProducer

from graph_service.events.records import OutgoingRecord
from graph_service.events.tracing import record_tracer, traced_send
from graph_service.streams.arns import table_of_stream
from graph_service.streams.tracing import batch_span, stream_tracer
from relay.sources import Converter

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

__all__ = ["RelayBatches", "UnknownSource", "table_of"]

log = structlog.get_logger(__name__)


class UnknownSource(ValueError):
    """A record from a table this relay does not read: a trigger on the wrong table, or another
    ``SG_TABLE_PREFIX``. Raised, not skipped, so the misconfiguration shows and nothing is lost."""


def table_of(arn: str) -> str:
    """The table name of a stream ARN; ``UnknownSource`` if it is not one."""
    name = table_of_stream(arn)
    if name is None:
        raise UnknownSource(f"not a DynamoDB stream ARN: {arn!r}")
    return name


class RelayBatches:
    """Stream records of the configured tables -> their events on their topics, acknowledged."""

    CONSUMER = "relay-lambda"
    """The consumer's name in its batches' spans (the Lambda relay keeps no checkpoints)."""

    def __init__(
        self,
        producer: AIOKafkaProducer,
        sources: Mapping[str, tuple[str, Converter]],
        *,
        tracer: Tracer | None = None,
    ) -> None:
        """``sources``: table name (with its prefix) -> (topic name, converter). ``tracer``: each
        Lambda event in a span of its stream batch (``streams/tracing.py``) and a span per record
        sent, its context in the record's headers (``events/tracing.py``); None: the process's
        tracers, if it traces."""
        self._send = traced_send(producer.send, tracer if tracer is not None else record_tracer())
        self._tracer = tracer if tracer is not None else stream_tracer()
        self._sources = dict(sources)

    def _source(self, record: dict[str, Any]) -> tuple[str, Converter]:
        table = table_of(str(record.get("eventSourceARN", "")))
        source = self._sources.get(table)
        if source is None:
            raise UnknownSource(f"a record of table {table}; this relay reads {', '.join(sorted(self._sources))}")
        return source

    @staticmethod
    def _events(convert: Converter, record: dict[str, Any]) -> list[OutgoingRecord] | None:
        """The record's events; None for an item that cannot make one, skipped (logged: a table
        written by another service may hold anything, and one bad item must not block its shard for
        good)."""
        try:
            return convert(record)
        except (KeyError, TypeError, ValueError) as exc:
            sequence = record.get("dynamodb", {}).get("SequenceNumber")
            log.error("relay_record_skipped", event_id=record.get("eventID"), sequence=sequence, error=repr(exc))
            return None

    async def produce(self, event: dict[str, Any]) -> dict[str, int]:
        """Produce every event of one Lambda event and wait for every acknowledgement; returns how
        many records it had, how many events were produced and how many records were skipped (their
        item made no event). Raises on the first failure (the whole batch is retried)."""
        records = event.get("Records", [])
        skipped = 0
        with self._span(records):
            outgoing: list[tuple[str, OutgoingRecord]] = []
            for record in records:
                topic, convert = self._source(record)  # every record checked before anything is sent
                events = self._events(convert, record)
                if events is None:
                    skipped += 1
                    continue
                outgoing += [(topic, e) for e in events]
            sent = [await self._send(topic, key=e.key, value=e.value, headers=e.headers) for topic, e in outgoing]
            await asyncio.gather(*sent)  # every event acknowledged before Lambda hears the batch is done
        log.info("relay_lambda_batch_produced", records=len(records), produced=len(sent), skipped=skipped)
        return {"records": len(records), "produced": len(sent), "skipped": skipped}

    def _span(self, records: list[dict[str, Any]]) -> contextlib.AbstractContextManager[object]:
        """The batch's span, named after the table of its first record (a trigger's batch is of one
        table's stream); nothing when the process does not trace or the batch is empty."""
        if self._tracer is None or not records:
            return contextlib.nullcontext()
        table = table_of(str(records[0].get("eventSourceARN", "")))
        return batch_span(self._tracer, table, self.CONSUMER, len(records))
