"""Builds the relay process (``socialgraph relay``): the streams of ``tweets`` and ``followers`` -> Kafka."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import structlog
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import FOLLOWERS, TWEETS
from graph_service.entrypoints.metrics_http import MetricsServer, metrics_address, start_metrics_server
from graph_service.events.kafka import client_options
from graph_service.settings import Settings
from graph_service.streams.checkpoints import CheckpointStore
from graph_service.streams.reader import StreamReader
from graph_service.telemetry.registry import process_registry
from graph_service.telemetry.relay import RelayMetrics
from graph_service.telemetry.streams import StreamMetrics
from relay.relay import Converter, Relay, graph_events, tweet_events

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
    metrics: MetricsServer

    @property
    def metrics_port(self) -> int:
        return self.metrics.port

    def _sources(self) -> list[tuple[str, str, Converter]]:
        return [
            (TWEETS, self.settings.tweets_topic, tweet_events),
            (FOLLOWERS, self.settings.graph_events_topic, graph_events),
        ]

    async def run(self, stop: asyncio.Event) -> None:
        try:
            await self.producer.start()
        except KafkaError as exc:
            raise RuntimeError(f"Kafka at {self.settings.kafka_bootstrap_servers}: {exc}") from exc
        sources = self._sources()
        readers = []
        for table, topic, convert in sources:
            name = f"{self.settings.relay_consumer_name}:{table}"
            checkpoints = CheckpointStore(self.dynamo, self.settings, name)
            relay = Relay(self.producer, topic, convert, checkpoints, metrics=self.relay_metrics)
            readers.append(
                await StreamReader.for_table(
                    self.dynamo,
                    self.streams,
                    self.settings,
                    table,
                    checkpoints,
                    relay.handle,
                    metrics=self.stream_metrics.consumer(name),
                )
            )
        log.info("relay_started", topics=[topic for _, topic, _ in sources])
        await asyncio.gather(*(reader.run(stop) for reader in readers))

    async def aclose(self) -> None:
        await self.producer.stop()
        self.dynamo.close()
        self.streams.close()
        await self.metrics.aclose()
        log.info("relay_stopped")


async def build_relay(settings: Settings, *, stale_after: float = 30.0) -> RelayRuntime:
    """The relay, not reading yet, and its metrics endpoint, listening (``PortInUse`` if taken);
    ``/readyz`` is 503 once a stream reader or one of its shards made no progress for ``stale_after`` seconds."""
    registry = process_registry()
    stream_metrics = StreamMetrics(registry, stale_after=stale_after)
    metrics = await start_metrics_server(metrics_address(settings, "relay"), registry, stream_metrics.problem)
    return RelayRuntime(
        settings,
        AsyncDynamo.build(settings),
        AsyncDynamo.build(settings, "dynamodbstreams"),
        AIOKafkaProducer(**client_options(settings), acks="all", linger_ms=5),
        stream_metrics,
        RelayMetrics(registry),
        metrics,
    )
