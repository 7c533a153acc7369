"""Builds the Redis client (single node or Cluster) from settings."""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from graph_service.settings import Settings

__all__ = ["AnyRedis", "build_redis"]

AnyRedis = Redis | RedisCluster


def build_redis(settings: Settings) -> AnyRedis | None:
    """None when caching is switched off. Connects lazily: nothing happens at build time."""
    if not settings.redis_url:
        return None
    options: dict[str, Any] = {
        "socket_timeout": settings.redis_timeout_seconds,
        "socket_connect_timeout": settings.redis_timeout_seconds,
        "decode_responses": True,
        "max_connections": settings.redis_max_connections,
    }
    if settings.redis_cluster:
        return RedisCluster.from_url(settings.redis_url, **options)
    return Redis.from_url(settings.redis_url, health_check_interval=10, **options)
