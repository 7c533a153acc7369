"""Adapters more than one process builds the same way. Nothing here connects: clients connect lazily."""

from __future__ import annotations

from graph_service.cache.graph_cache import GraphCache
from graph_service.redis_client.connect import graph_cache_redis, timelines_redis
from graph_service.settings import Settings
from graph_service.timelines.timeline_store import TimelineStore

__all__ = ["build_graph_cache", "build_timelines"]


def build_graph_cache(settings: Settings) -> GraphCache | None:
    """The graph cache, or None when caching is switched off (``SG_REDIS_URL`` empty)."""
    redis = graph_cache_redis(settings)
    if redis is None:
        return None
    return GraphCache(
        redis,
        ttl_seconds=settings.cache_ttl_seconds,
        list_limit=settings.adjacency_cache_limit,
        max_in_flight=settings.redis_max_connections,
    )


def build_timelines(settings: Settings) -> TimelineStore | None:
    """The Redis timelines (``SG_TIMELINE_REDIS_URL`` if set, else next to the caches); None without Redis."""
    redis = timelines_redis(settings)
    if redis is None:
        return None
    return TimelineStore(
        redis,
        timeline_cap=settings.timeline_cap,
        recent_cap=settings.recent_tweets_cap,
        author_ttl_seconds=settings.tweet_author_ttl_seconds,
    )
