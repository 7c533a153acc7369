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
from graph_service.dynamodb.tables import FOLLOWERS, TableNames
from graph_service.entrypoints.components import build_graph_cache, stream_pacing
from graph_service.entrypoints.metrics_http import MetricsServer, metrics_address, start_metrics_server
from graph_service.entrypoints.span_export import export_spans
from graph_service.settings import Settings
from graph_service.store.counter_table import DynamoCounterTable
from graph_service.streams.checkpoints import CheckpointStore
from graph_service.streams.reader import StreamReader
from graph_service.telemetry.backend_calls import DynamoCallMetrics, RedisCallMetrics
from graph_service.telemetry.cache import CacheMetrics
from graph_service.telemetry.counters import CountersMetrics
from graph_service.telemetry.registry import process_registry
from graph_service.telemetry.streams import StreamMetrics
from graph_service.telemetry.tracing import configure_tracing

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
    stream_metrics: StreamMetrics
    """Lag per shard; ``/readyz`` asks it whether the reader runs and progresses (batches handled,
    or reads finding its shards caught up)."""
    metrics: MetricsServer

    @property
    def metrics_port(self) -> int:
        return self.metrics.port

    async def run(self, stop: asyncio.Event) -> None:
        await self.consumer.redo_last_repairs()
        reader = await StreamReader.for_table(
            self.dynamo,
            self.streams,
            TableNames(self.settings.table_prefix),
            FOLLOWERS,
            self.checkpoints,
            self.consumer.handle,
            pacing=stream_pacing(self.settings),
            metrics=self.stream_metrics.consumer(self.settings.counters_consumer_name),
        )
        log.info("counters_started", lease_owner=reader.owner)  # its name in the shards' leases
        await reader.run(stop)

    async def aclose(self) -> None:
        await self.repairer.aclose()
        if self.cache is not None:
            await self.cache.aclose()
        self.dynamo.close()
        self.streams.close()
        await self.metrics.aclose()
        log.info("counters_stopped")
        await export_spans()  # the spans still buffered, before the process ends


async def build_counters(settings: Settings, *, stale_after: float = 30.0) -> CountersRuntime:
    """The consumer, not reading yet, and its metrics endpoint, listening (``PortInUse`` if taken);
    ``/readyz`` is 503 once a stream reader or one of its shards made no progress for ``stale_after`` seconds."""
    configure_tracing("counters")  # first: the reader decides when built whether it traces
    registry = process_registry()
    stream_metrics = StreamMetrics(registry, stale_after=stale_after)
    metrics = await start_metrics_server(metrics_address(settings, "counters"), registry, stream_metrics.problem)
    counters_metrics = CountersMetrics(registry)
    dynamo_calls = DynamoCallMetrics(registry)
    dynamo = AsyncDynamo.build(settings, metrics=dynamo_calls)
    streams = AsyncDynamo.build(settings, "dynamodbstreams", metrics=dynamo_calls)
    tables = TableNames(settings.table_prefix)
    applier = CounterApplier(DynamoCounterTable(dynamo, tables))
    checkpoints = CheckpointStore(dynamo, tables, settings.counters_consumer_name)
    cache = build_graph_cache(settings, redis_calls=RedisCallMetrics(registry))
    if cache is not None:
        cache.report_to(CacheMetrics(registry))
    repairer = CacheRepairer(cache, applier, checkpoints, metrics=counters_metrics)
    consumer = CountersConsumer(applier, checkpoints, repairer, metrics=counters_metrics)
    return CountersRuntime(settings, dynamo, streams, cache, checkpoints, repairer, consumer, stream_metrics, metrics)
