"""Builds a fanout worker process (``socialgraph fanout``): Kafka events -> Redis timelines."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiokafka.errors import KafkaError

from fanout.applier import Fanout, FanoutConfig
from fanout.worker import FanoutWorker, Offsets, WorkerConfig
from graph_service.cache.follower_source import CachedFollowerSource
from graph_service.cache.graph_cache import GraphCache
from graph_service.domain.ports import FollowerSource
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import TableNames
from graph_service.entrypoints.components import build_graph_cache, build_timelines
from graph_service.entrypoints.metrics_http import MetricsServer, metrics_address, start_metrics_server
from graph_service.entrypoints.span_export import export_spans
from graph_service.events.kafka import client_options, topic_check, topic_names
from graph_service.events.kinds import KIND_NAMES
from graph_service.events.topics import TopicWatch
from graph_service.settings import Settings
from graph_service.store.account_store import DynamoAccounts
from graph_service.store.graph_store import DynamoGraphStore
from graph_service.telemetry.backend_calls import DynamoCallMetrics, RedisCallMetrics
from graph_service.telemetry.cache import CacheMetrics
from graph_service.telemetry.fanout import FanoutMetrics
from graph_service.telemetry.registry import process_registry
from graph_service.telemetry.topics import TopicMetrics
from graph_service.telemetry.tracing import configure_tracing
from graph_service.timelines.timeline_store import TimelineStore

__all__ = ["FanoutRuntime", "build_fanout", "fanout_config"]


def fanout_config(settings: Settings) -> FanoutConfig:
    """What the fanout applier reads of the settings."""
    return FanoutConfig(batch_size=settings.fanout_batch_size, celebrity_threshold=settings.celebrity_threshold)


@dataclass
class FanoutRuntime:
    settings: Settings
    worker: FanoutWorker
    """Its ``stats`` stay readable after the run."""
    fanout: Fanout
    """What one event does, as the worker applies it."""
    timelines: TimelineStore
    cache: GraphCache | None
    dynamo: AsyncDynamo
    metrics: MetricsServer
    """``/readyz``: both topics exist with SG_TOPIC_PARTITIONS partitions, the Kafka consumer started
    and the broker answered it recently (records fetched, or a metadata request answered while polls
    come back empty)."""

    @property
    def metrics_port(self) -> int:
        return self.metrics.port

    async def run(self, stop: asyncio.Event) -> None:
        try:
            await self.worker.run(stop)
        except KafkaError as exc:
            raise RuntimeError(f"Kafka at {self.settings.kafka_bootstrap_servers}: {exc}") from exc

    async def aclose(self) -> None:
        await self.timelines.aclose()
        if self.cache is not None:
            await self.cache.aclose()
        self.dynamo.close()
        await self.metrics.aclose()
        await export_spans()  # the spans still buffered, before the process ends


async def build_fanout(
    settings: Settings,
    *,
    after_writes: Callable[[Offsets], Awaitable[None]] | None = None,
    stale_after: float = 30.0,
) -> FanoutRuntime:
    """A worker with its own Redis and DynamoDB clients. The followers come from the graph cache
    where it holds them whole, else from DynamoDB, and the worker fills no cache; ``after_writes``
    runs between a batch's writes and its commit (instrumentation). Its metrics endpoint listens when
    this returns (``PortInUse`` if taken); ``/readyz`` is 503 after ``stale_after`` seconds without an
    answer from the broker."""
    configure_tracing("fanout")  # first: the worker and its clients decide when built whether they trace
    registry = process_registry()
    redis_calls = RedisCallMetrics(registry)
    timelines = build_timelines(settings, redis_calls=redis_calls)
    if timelines is None:
        raise RuntimeError("the fanout worker needs Redis: set SG_REDIS_URL")
    fanout_metrics = FanoutMetrics(registry, kinds=KIND_NAMES, stale_after=stale_after)
    topics = TopicWatch(topic_check(settings), TopicMetrics(registry))

    def readiness() -> str | None:
        return topics.problem() or fanout_metrics.heartbeat.problem()

    dynamo = AsyncDynamo.build(settings, metrics=DynamoCallMetrics(registry))
    try:
        metrics = await start_metrics_server(metrics_address(settings, "fanout"), registry, readiness)
        try:
            await timelines.load_scripts()
        except BaseException:
            await metrics.aclose()
            raise
    except BaseException:
        await timelines.aclose()
        dynamo.close()
        raise
    cache = build_graph_cache(settings, redis_calls=redis_calls)
    followers: FollowerSource = DynamoGraphStore(dynamo, TableNames(settings.table_prefix))
    if cache is not None:
        cache.report_to(CacheMetrics(registry))
        followers = CachedFollowerSource(followers, cache)
    states = DynamoAccounts(dynamo, TableNames(settings.table_prefix))
    fanout = Fanout(followers, timelines, fanout_config(settings), states=states, metrics=fanout_metrics)
    consuming = WorkerConfig(
        topics=topic_names(settings),
        group=settings.fanout_group,
        client_options=functools.partial(client_options, settings),
    )
    worker = FanoutWorker(consuming, fanout, after_writes=after_writes, metrics=fanout_metrics, topics=topics)
    return FanoutRuntime(settings, worker, fanout, timelines, cache, dynamo, metrics)
