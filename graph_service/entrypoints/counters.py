"""Builds the counters consumer process (``socialgraph counters``)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import structlog

from counters.applier import CounterApplier
from counters.consumer import CountersConsumer
from counters.repairs import CacheRepairer
from graph_service.cache.graph_cache import GraphCache
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import FOLLOWERS
from graph_service.entrypoints.components import build_graph_cache
from graph_service.settings import Settings
from graph_service.store.counter_table import DynamoCounterTable
from graph_service.streams.checkpoints import CheckpointStore
from graph_service.streams.reader import StreamReader

__all__ = ["CountersRuntime", "build_counters"]

log = structlog.get_logger(__name__)


@dataclass
class CountersRuntime:
    settings: Settings
    dynamo: AsyncDynamo
    streams: AsyncDynamo
    cache: GraphCache | None
    checkpoints: CheckpointStore
    repairer: CacheRepairer
    consumer: CountersConsumer

    async def run(self, stop: asyncio.Event) -> None:
        await self.consumer.redo_last_repairs()
        reader = await StreamReader.for_table(
            self.dynamo, self.streams, self.settings, FOLLOWERS, self.checkpoints, self.consumer.handle
        )
        log.info("counters_started")
        await reader.run(stop)

    async def aclose(self) -> None:
        await self.repairer.aclose()
        if self.cache is not None:
            await self.cache.aclose()
        self.dynamo.close()
        self.streams.close()
        log.info("counters_stopped")


async def build_counters(settings: Settings) -> CountersRuntime:
    dynamo = AsyncDynamo.build(settings)
    streams = AsyncDynamo.build(settings, "dynamodbstreams")
    applier = CounterApplier(DynamoCounterTable(dynamo, settings))
    checkpoints = CheckpointStore(dynamo, settings, settings.counters_consumer_name)
    cache = build_graph_cache(settings)
    repairer = CacheRepairer(cache, applier, checkpoints)
    consumer = CountersConsumer(applier, checkpoints, repairer)
    return CountersRuntime(settings, dynamo, streams, cache, checkpoints, repairer, consumer)
