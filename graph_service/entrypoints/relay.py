"""Builds the relay process (``socialgraph relay``): the streams of ``tweets`` and ``followers`` -> Kafka."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import structlog
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import FOLLOWERS, TWEETS
from graph_service.events.kafka import client_options
from graph_service.settings import Settings
from graph_service.streams.checkpoints import CheckpointStore
from graph_service.streams.reader import StreamReader
from relay.relay import Converter, Relay, graph_events, tweet_events

__all__ = ["RelayRuntime", "build_relay"]

log = structlog.get_logger(__name__)


@dataclass
class RelayRuntime:
    settings: Settings
    dynamo: AsyncDynamo
    streams: AsyncDynamo
    producer: AIOKafkaProducer

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
            checkpoints = CheckpointStore(self.dynamo, self.settings, f"{self.settings.relay_consumer_name}:{table}")
            relay = Relay(self.producer, topic, convert, checkpoints)
            readers.append(
                await StreamReader.for_table(self.dynamo, self.streams, self.settings, table, checkpoints, relay.handle)
            )
        log.info("relay_started", topics=[topic for _, topic, _ in sources])
        await asyncio.gather(*(reader.run(stop) for reader in readers))

    async def aclose(self) -> None:
        await self.producer.stop()
        self.dynamo.close()
        self.streams.close()
        log.info("relay_stopped")


async def build_relay(settings: Settings) -> RelayRuntime:
    return RelayRuntime(
        settings,
        AsyncDynamo.build(settings),
        AsyncDynamo.build(settings, "dynamodbstreams"),
        AIOKafkaProducer(**client_options(settings), acks="all", linger_ms=5),
    )
