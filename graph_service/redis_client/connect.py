"""Builds a Redis client (single node or Cluster); nothing connects until the first call."""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from graph_service.settings import Settings

__all__ = ["AnyRedis", "build_redis", "graph_cache_redis", "timelines_redis"]

AnyRedis = Redis | RedisCluster


def build_redis(url: str, *, cluster: bool, settings: Settings) -> AnyRedis:
    """A client of ``url`` (a seed node if ``cluster``), with the timeouts and pool size of ``settings``."""
    options: dict[str, Any] = {
        "socket_timeout": settings.redis_timeout_seconds,
        "socket_connect_timeout": settings.redis_timeout_seconds,
        "decode_responses": True,
        "max_connections": settings.redis_max_connections,
    }
    if cluster:
        return RedisCluster.from_url(url, **options)
    return Redis.from_url(url, health_check_interval=10, **options)


def graph_cache_redis(settings: Settings) -> AnyRedis | None:
    """The Redis of the graph cache; None when caching is switched off (``SG_REDIS_URL`` empty)."""
    if not settings.redis_url:
        return None
    return build_redis(settings.redis_url, cluster=settings.redis_cluster, settings=settings)


def timelines_redis(settings: Settings) -> AnyRedis | None:
    """The Redis of the timelines: ``SG_TIMELINE_REDIS_URL`` if set, else the graph cache's; None
    when both are empty."""
    if settings.timeline_redis_url:
        return build_redis(settings.timeline_redis_url, cluster=settings.timeline_redis_cluster, settings=settings)
    return graph_cache_redis(settings)
