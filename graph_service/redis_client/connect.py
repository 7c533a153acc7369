"""Builds a Redis client (single node or Cluster); nothing connects until the first call. Its calls
are counted by operation and, with tracing on, traced (``observed.py``)."""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from graph_service.redis_client.observed import ObservedCluster, ObservedRedis, RedisObserver
from graph_service.settings import Settings
from graph_service.telemetry import tracing
from graph_service.telemetry.backend_calls import RedisCallMetrics

__all__ = ["AnyRedis", "build_redis", "graph_cache_redis", "timelines_redis"]

AnyRedis = Redis | RedisCluster


def build_redis(url: str, *, cluster: bool, settings: Settings, metrics: RedisCallMetrics | None = None) -> AnyRedis:
    """A client of ``url`` (a seed node if ``cluster``), with the timeouts and pool size of ``settings``;
    its calls counted in ``metrics`` (default: a private registry), and traced if this process's
    tracing is on when it is built."""
    options: dict[str, Any] = {
        "socket_timeout": settings.redis_timeout_seconds,
        "socket_connect_timeout": settings.redis_timeout_seconds,
        "decode_responses": True,
        "max_connections": settings.redis_max_connections,
    }
    observer = RedisObserver(
        url,
        metrics if metrics is not None else RedisCallMetrics(),
        tracing.tracer(__name__) if tracing.enabled() else None,
    )
    client = (
        ObservedCluster.from_url(url, **options)
        if cluster
        else ObservedRedis.from_url(url, health_check_interval=10, **options)
    )
    assert isinstance(client, ObservedRedis | ObservedCluster)  # from_url makes the class it is called on
    client.observer = observer
    return client


def graph_cache_redis(settings: Settings, metrics: RedisCallMetrics | None = None) -> AnyRedis | None:
    """The Redis of the graph cache; None when caching is switched off (``SG_REDIS_URL`` empty)."""
    if not settings.redis_url:
        return None
    return build_redis(settings.redis_url, cluster=settings.redis_cluster, settings=settings, metrics=metrics)


def timelines_redis(settings: Settings, metrics: RedisCallMetrics | None = None) -> AnyRedis | None:
    """The Redis of the timelines: ``SG_TIMELINE_REDIS_URL`` if set, else the graph cache's; None
    when both are empty."""
    if settings.timeline_redis_url:
        return build_redis(
            settings.timeline_redis_url, cluster=settings.timeline_redis_cluster, settings=settings, metrics=metrics
        )
    return graph_cache_redis(settings, metrics)
