"""Adapters more than one process builds the same way. Nothing here connects: clients connect lazily."""

from __future__ import annotations

import functools
from dataclasses import replace

from graph_service.cache.graph_cache import GraphCache
from graph_service.cache.lease import CacheLease, lease_seconds_for
from graph_service.cache.near_cache import NearCache
from graph_service.cache.trust import TrustCheck
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import CHECKPOINTS
from graph_service.operations.consumer_lag import CountersStream
from graph_service.redis_client.connect import build_redis, graph_cache_redis, timelines_redis
from graph_service.settings import Settings
from graph_service.store.cache_leases import DynamoLeaseRegistry
from graph_service.streams.reader import StreamPacing
from graph_service.telemetry.backend_calls import RedisCallMetrics
from graph_service.telemetry.cache import LeaseMetrics, NearCacheMetrics
from graph_service.timelines.timeline_store import TimelineStore

__all__ = [
    "build_cache_lease",
    "build_graph_cache",
    "build_near_cache",
    "build_timelines",
    "counters_stream",
    "stream_pacing",
]


def build_near_cache(settings: Settings, metrics: NearCacheMetrics) -> NearCache | None:
    """The serving process's near cache, for ``build_graph_cache``; None without Redis or with
    ``SG_NEAR_CACHE_ENTRIES=0``. Its invalidation connection opens at the first
    ``start()``. (Its own function: the other processes never read its settings, and their
    ``--help`` does not list them.)"""
    if not settings.redis_url or settings.near_cache_entries < 1:
        return None
    return NearCache(
        settings.redis_url,
        cluster=settings.redis_cluster,
        max_entries=settings.near_cache_entries,
        timeout_seconds=settings.redis_timeout_seconds,  # a fence unanswered this long: the link is lost
        metrics=metrics,
    )


def build_graph_cache(
    settings: Settings, *, near: NearCache | None = None, redis_calls: RedisCallMetrics | None = None
) -> GraphCache | None:
    """The graph cache, or None when caching is switched off (``SG_REDIS_URL`` empty); with the
    serving process's ``near`` cache in front (``build_near_cache``); its Redis calls counted in
    ``redis_calls``."""
    redis = graph_cache_redis(settings, redis_calls)
    if redis is None:
        return None
    return GraphCache(
        redis,
        ttl_seconds=settings.cache_ttl_seconds,
        list_limit=settings.adjacency_cache_limit,
        max_in_flight=settings.redis_max_connections,
        near=near,
        trust=TrustCheck(redis),
    )


def build_cache_lease(
    settings: Settings,
    dynamo: AsyncDynamo,
    cache: GraphCache,
    *,
    metrics: LeaseMetrics | None = None,
    redis_calls: RedisCallMetrics | None = None,
) -> CacheLease | None:
    """The serving process's cache lease (``cache/lease.py``), or None when caching is off. Its own
    Redis client waits half a lease for an answer (a renewal that timed out gives the lease up)."""
    if not settings.redis_url:
        return None
    lease_seconds = lease_seconds_for(settings.redis_timeout_seconds)
    redis = build_redis(
        settings.redis_url,
        cluster=settings.redis_cluster,
        settings=replace(settings, redis_timeout_seconds=lease_seconds / 2, redis_max_connections=4),
        metrics=redis_calls,
    )
    registry = DynamoLeaseRegistry(dynamo, settings.table(CHECKPOINTS))
    return CacheLease(redis, registry, lease_seconds=lease_seconds, owes=lambda: cache.owes, metrics=metrics)


def build_timelines(settings: Settings, *, redis_calls: RedisCallMetrics | None = None) -> TimelineStore | None:
    """The Redis timelines (``SG_TIMELINE_REDIS_URL`` if set, else next to the caches); None without
    Redis. ``redis_calls``: where its Redis calls are counted."""
    redis = timelines_redis(settings, redis_calls)
    if redis is None:
        return None
    return TimelineStore(
        redis,
        timeline_cap=settings.timeline_cap,
        recent_cap=settings.recent_tweets_cap,
        author_ttl_seconds=settings.tweet_author_ttl_seconds,
    )


def stream_pacing(settings: Settings) -> StreamPacing:
    """The pace of the stream consumers (counters, relay)."""
    return StreamPacing(
        poll_seconds=settings.stream_poll_seconds,
        refresh_seconds=settings.shard_refresh_seconds,
        lease_seconds=settings.lease_seconds,
    )


def counters_stream(settings: Settings) -> CountersStream:
    """Where ``fsck`` and ``reconcile`` find how far behind the counters consumer is."""
    return CountersStream(
        consumer=settings.counters_consumer_name,
        open_streams=functools.partial(AsyncDynamo.build, settings, "dynamodbstreams"),
    )
