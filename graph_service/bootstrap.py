"""The composition root: builds every client and adapter of a process from ``Settings``."""

from __future__ import annotations

from dataclasses import replace

from graph_service.cache.cached_store import CachedEdgeStore
from graph_service.cache.graph_cache import GraphCache
from graph_service.cache.redis_client import build_redis
from graph_service.service import GraphService
from graph_service.settings import Settings
from graph_service.store.dynamo_client import AsyncDynamo
from graph_service.store.dynamo_edge_store import DynamoEdgeStore
from graph_service.store.edge_store import EdgeStore
from graph_service.suggestions import Suggester
from graph_service.timeline.service import TimelineService
from graph_service.timeline.timeline_store import TimelineStore
from graph_service.tweets import TweetStore

__all__ = ["build_cache", "build_service", "build_store", "build_timeline_service", "build_timelines"]


def build_cache(settings: Settings) -> GraphCache | None:
    redis = build_redis(settings)
    if redis is None:
        return None
    return GraphCache(
        redis,
        ttl_seconds=settings.cache_ttl_seconds,
        list_limit=settings.adjacency_cache_limit,
        max_in_flight=settings.redis_max_connections,
    )


def build_store(settings: Settings) -> tuple[EdgeStore, GraphCache | None]:
    store: EdgeStore = DynamoEdgeStore(AsyncDynamo.build(settings), settings)
    cache = build_cache(settings)
    if cache is not None:
        store = CachedEdgeStore(store, cache)
    return store, cache


def build_service(settings: Settings) -> tuple[GraphService, EdgeStore]:
    store, cache = build_store(settings)
    return GraphService(store, settings, Suggester(store, cache, settings)), store


def build_timelines(settings: Settings) -> TimelineStore | None:
    """The Redis timelines (None when Redis is switched off): in SG_TIMELINE_REDIS_URL if set, else
    next to the caches."""
    if settings.timeline_redis_url:
        settings = replace(
            settings, redis_url=settings.timeline_redis_url, redis_cluster=settings.timeline_redis_cluster
        )
    redis = build_redis(settings)
    if redis is None:
        return None
    return TimelineStore(
        redis,
        timeline_cap=settings.timeline_cap,
        recent_cap=settings.recent_tweets_cap,
        author_ttl_seconds=settings.tweet_author_ttl_seconds,
    )


def build_timeline_service(settings: Settings, graph: EdgeStore) -> TimelineService:
    tweets = TweetStore(AsyncDynamo.build(settings), settings)
    return TimelineService(build_timelines(settings), tweets, graph, settings)
