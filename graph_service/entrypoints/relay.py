"""Builds the relay process (``socialgraph relay``): the streams of its sources (``relay/sources.py``:
``tweets`` and ``followers``) -> Kafka."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from dataclasses import dataclass, field

import structlog
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError
from botocore.exceptions import ClientError

from graph_service.domain.errors import Unavailable
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import TableNames
from graph_service.entrypoints.components import stream_pacing
from graph_service.entrypoints.metrics_http import MetricsServer, metrics_address, start_metrics_server
from graph_service.entrypoints.span_export import export_spans
from graph_service.events.kafka import client_options, topic_check, topic_names
from graph_service.events.topics import TopicWatch, end_offsets
from graph_service.settings import Settings
from graph_service.streams.checkpoints import CheckpointStore
from graph_service.streams.reader import StreamReader
from graph_service.telemetry.backend_calls import DynamoCallMetrics
from graph_service.telemetry.failures import FailureLog
from graph_service.telemetry.registry import process_registry
from graph_service.telemetry.relay import RelayMetrics
from graph_service.telemetry.streams import StreamMetrics
from graph_service.telemetry.topics import TopicMetrics
from graph_service.telemetry.tracing import configure_tracing
from relay.log_guard import LogGuard
from relay.relay import Relay
from relay.sources import SOURCES

__all__ = ["RelayRuntime", "build_relay"]

log = structlog.get_logger(__name__)


@dataclass
class RelayRuntime:
    settings: Settings
    dynamo: AsyncDynamo
    streams: AsyncDynamo
    producer: AIOKafkaProducer
    stream_metrics: StreamMetrics
    """Lag per shard of both streams; ``/readyz`` asks it whether both readers run and progress."""
    relay_metrics: RelayMetrics
    topics: TopicWatch
    """Both topics as configured; ``/readyz`` is 503 while one is missing or mis-sized."""
    topic_metrics: TopicMetrics
    metrics: MetricsServer
    guards: list[LogGuard] = field(default_factory=list)
    """One per topic, once running: what noticed a log that went backwards (``rewinds``)."""
    _failures: FailureLog = field(default_factory=lambda: FailureLog(log))

    @property
    def metrics_port(self) -> int:
        return self.metrics.port

    async def run(self, stop: asyncio.Event) -> None:
        try:
            await self.producer.start()
        except KafkaError as exc:
            raise RuntimeError(f"Kafka at {self.settings.kafka_bootstrap_servers}: {exc}") from exc
        if not await self.topics.wait_ok(stop):  # not ready meanwhile; create-topics heals it
            return
        readers = []
        names = topic_names(self.settings)
        for source in SOURCES:
            table, topic, convert = source.table, names[source.topic], source.convert
            name = f"{self.settings.relay_consumer_name}:{table}"
            checkpoints = CheckpointStore(self.dynamo, TableNames(self.settings.table_prefix), name)
            guard = LogGuard(topic, checkpoints, self.topic_metrics)
            relay = Relay(
                self.producer, topic, convert, checkpoints, guard=guard, topics=self.topics, metrics=self.relay_metrics
            )
            reader = await StreamReader.for_table(
                self.dynamo,
                self.streams,
                TableNames(self.settings.table_prefix),
                table,
                checkpoints,
                relay.handle,
                pacing=stream_pacing(self.settings),
                metrics=self.stream_metrics.consumer(name),
            )
            guard.attach(reader)
            self.guards.append(guard)
            readers.append(reader)
        await self._compare_logs(True)  # records lost while no relay ran are produced again first
        log.info("relay_started", topics=[guard.topic for guard in self.guards])
        # The watch is cancelled once the readers have stopped: a check against a broker that does
        # not answer takes up to 15 s, which a stop must not wait for.
        watch = asyncio.create_task(self.topics.run(stop, self._compare_logs), name="topic-watch")
        try:
            await asyncio.gather(*(reader.run(stop) for reader in readers))
        finally:
            watch.cancel()
            await asyncio.gather(watch, return_exceptions=True)

    async def _compare_logs(self, topics_ok: bool) -> None:
        """After a topic check that found both topics fine: rewind a stream whose topic's log ends at
        or below what the relay produced there."""
        if not topics_ok:
            return
        partitions = self.settings.topic_partitions
        for guard in self.guards:
            try:
                await guard.compare(
                    functools.partial(end_offsets, client_options(self.settings), guard.topic, partitions)
                )
            except (KafkaError, OSError, TimeoutError) as exc:
                self._failures.failure("relay_log_check_failed", "kafka", topic=guard.topic, error=repr(exc))
                self.topics.suspect()
            except (Unavailable, ClientError) as exc:  # DynamoDB: the next check tries again
                self._failures.failure("relay_log_check_failed", "dynamodb", topic=guard.topic, error=str(exc))

    async def aclose(self) -> None:
        with contextlib.suppress(Exception, TimeoutError):  # a broker that is gone must not hold the stop
            await asyncio.wait_for(self.producer.stop(), timeout=2)
        self.dynamo.close()
        self.streams.close()
        await self.metrics.aclose()
        log.info("relay_stopped")
        await export_spans()  # the spans still buffered, before the process ends


async def build_relay(settings: Settings, *, stale_after: float = 30.0) -> RelayRuntime:
    """The relay, not reading yet, and its metrics endpoint, listening (``PortInUse`` if taken);
    ``/readyz`` is 503 once a stream reader or one of its shards made no progress for ``stale_after`` seconds,
    and while a topic is missing or mis-sized."""
    configure_tracing("relay")  # first: the readers and relays decide when built whether they trace
    registry = process_registry()
    stream_metrics = StreamMetrics(registry, stale_after=stale_after)
    topic_metrics = TopicMetrics(registry)
    topics = TopicWatch(topic_check(settings), topic_metrics)

    def readiness() -> str | None:
        return topics.problem() or stream_metrics.problem()

    metrics = await start_metrics_server(metrics_address(settings, "relay"), registry, readiness)
    dynamo_calls = DynamoCallMetrics(registry)
    return RelayRuntime(
        settings,
        AsyncDynamo.build(settings, metrics=dynamo_calls),
        AsyncDynamo.build(settings, "dynamodbstreams", metrics=dynamo_calls),
        AIOKafkaProducer(**client_options(settings), acks="all", linger_ms=5),
        stream_metrics,
        RelayMetrics(registry),
        topics,
        topic_metrics,
        metrics,
    )
