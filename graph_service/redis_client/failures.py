"""How Redis fails, named once for the graph cache (every failure is a miss) and the timelines
(unreachable is retried or ``TIMELINE_UNAVAILABLE``; a refused command is raised as it is)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from redis.exceptions import (
    BusyLoadingError,
    ClusterDownError,
    RedisClusterException,
    RedisError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

__all__ = ["ANY_FAILURE", "TORN_CONNECTION", "UNANSWERED", "UNREACHABLE", "retry_torn"]

T = TypeVar("T")

TORN_CONNECTION: tuple[type[Exception], ...] = (AttributeError, TypeError)
"""redis-py can leak a connection torn down under it (a peer reset, or a pooled cluster connection
disconnected by another task mid-use) as AttributeError/TypeError instead of ConnectionError
(redis/redis-py#4287)."""

UNREACHABLE: tuple[type[Exception], ...] = (
    RedisConnectionError,
    RedisTimeoutError,
    BusyLoadingError,
    TryAgainError,
    ClusterDownError,
    RedisClusterException,  # a cluster redis-py cannot reach, or whose slots it cannot place
    OSError,
)
"""Redis did not answer (or cannot answer yet): trying again later can help."""

UNANSWERED: tuple[type[Exception], ...] = (*TORN_CONNECTION, *UNREACHABLE)
"""No answer at all: unreachable, or a torn connection."""

ANY_FAILURE: tuple[type[Exception], ...] = (RedisError, *UNANSWERED)
"""Anything Redis can fail with, refused commands included."""


async def retry_torn(call: Callable[[], Awaitable[T]], *, attempts: int, also: tuple[type[Exception], ...] = ()) -> T:
    """Run an idempotent Redis call, again on a fresh connection when the connection was torn
    (or failed with one of ``also``), ``attempts`` times at most; the last failure is raised."""
    for _ in range(attempts - 1):
        try:
            return await call()
        except (*TORN_CONNECTION, *also):
            continue
    return await call()
