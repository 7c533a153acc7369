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
from collections.abc import Mapping
from typing import Any

import structlog
from aiokafka import AIOKafkaProducer

from graph_service.events.records import OutgoingRecord
from relay.sources import Converter

__all__ = ["RelayBatches", "UnknownSource", "table_of"]

log = structlog.get_logger(__name__)


class UnknownSource(ValueError):
    """A record from a table this relay does not read: a trigger on the wrong table, or another
    ``SG_TABLE_PREFIX``. Raised, not skipped, so the misconfiguration shows and nothing is lost."""


def table_of(arn: str) -> str:
    """The table name of a stream ARN (``arn:aws:dynamodb:REGION:ACCOUNT:table/NAME/stream/LABEL``)."""
    _, found, rest = arn.partition(":table/")
    name, stream, _ = rest.partition("/stream/")
    if not (found and stream and name):
        raise UnknownSource(f"not a DynamoDB stream ARN: {arn!r}")
    return name


class RelayBatches:
    """Stream records of the configured tables -> their events on their topics, acknowledged."""

    def __init__(self, producer: AIOKafkaProducer, sources: Mapping[str, tuple[str, Converter]]) -> None:
        """``sources``: table name (with its prefix) -> (topic name, converter)."""
        self._producer = producer
        self._sources = dict(sources)

    def _source(self, record: dict[str, Any]) -> tuple[str, Converter]:
        table = table_of(str(record.get("eventSourceARN", "")))
        source = self._sources.get(table)
        if source is None:
            raise UnknownSource(f"a record of table {table}; this relay reads {', '.join(sorted(self._sources))}")
        return source

    @staticmethod
    def _events(convert: Converter, record: dict[str, Any]) -> list[OutgoingRecord]:
        """The record's events; none for an item that cannot make one (logged: a table written by
        another service may hold anything, and one bad item must not block its shard for good)."""
        try:
            return convert(record)
        except (KeyError, TypeError, ValueError) as exc:
            sequence = record.get("dynamodb", {}).get("SequenceNumber")
            log.error("relay_record_skipped", event_id=record.get("eventID"), sequence=sequence, error=repr(exc))
            return []

    async def produce(self, event: dict[str, Any]) -> dict[str, int]:
        """Produce every event of one Lambda event and wait for every acknowledgement; returns how
        many events were produced. Raises on the first failure (the whole batch is retried)."""
        records = event.get("Records", [])
        outgoing: list[tuple[str, OutgoingRecord]] = []
        for record in records:
            topic, convert = self._source(record)  # every record checked before anything is sent
            outgoing += [(topic, e) for e in self._events(convert, record)]
        sent = [await self._producer.send(topic, key=e.key, value=e.value, headers=e.headers) for topic, e in outgoing]
        await asyncio.gather(*sent)  # every event acknowledged before Lambda hears the batch is done
        log.info("relay_lambda_batch_produced", records=len(records), produced=len(sent))
        return {"records": len(records), "produced": len(sent)}
