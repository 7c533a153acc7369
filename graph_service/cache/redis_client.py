"""Builds the Redis client (single node or Cluster) from settings."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from graph_service.settings import Settings

__all__ = ["TORN_CONNECTION", "AnyRedis", "build_redis", "retry_torn"]

AnyRedis = Redis | RedisCluster
T = TypeVar("T")
# redis-py can leak a connection torn down under it (a peer reset, or a pooled cluster connection
# disconnected by another task mid-use) as AttributeError/TypeError instead of ConnectionError
# (redis/redis-py#4287).
TORN_CONNECTION: tuple[type[Exception], ...] = (AttributeError, TypeError)


async def retry_torn(call: Callable[[], Awaitable[T]], *, attempts: int, also: tuple[type[Exception], ...] = ()) -> T:
    """Run an idempotent Redis call, again on a fresh connection when the connection was torn
    (or failed with one of ``also``), ``attempts`` times at most; the last failure is raised."""
    for _ in range(attempts - 1):
        try:
            return await call()
        except (*TORN_CONNECTION, *also):
            continue
    return await call()


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
