"""Builds the gRPC API process (``socialgraph serve``): adapters, services, server."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import structlog

from graph_service.api.server import GrpcServer, start_grpc_server
from graph_service.api.service import GraphService
from graph_service.api.suggestions import Suggester
from graph_service.api.timeline_service import TimelineService
from graph_service.cache.cached_graph import CachedGraphReads
from graph_service.cache.graph_cache import GraphCache
from graph_service.cache.write_through import CacheWriteThrough, NoGraphCache
from graph_service.domain.ports import GraphChanges, GraphReads, ListReads, RelationshipReads
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.entrypoints.components import build_graph_cache, build_timelines
from graph_service.settings import DEV_PAGE_TOKEN_SECRET, Settings
from graph_service.store.graph_store import DynamoGraphStore
from graph_service.tweets.tweet_store import DynamoTweetStore

__all__ = ["ServerRuntime", "build_server"]

log = structlog.get_logger(__name__)
Closer = Callable[[], Awaitable[None]]


@dataclass
class ServerRuntime:
    grpc: GrpcServer
    cache: GraphCache | None
    """The graph cache (None without Redis); its hit counters are what tests and benchmarks read."""
    closers: list[Closer] = field(default_factory=list)
    """What ``aclose`` releases after the server has drained, in this order."""

    @property
    def port(self) -> int:
        return self.grpc.port

    async def run(self, stop: asyncio.Event) -> None:
        await stop.wait()
        log.info("shutdown_requested")

    async def aclose(self) -> None:
        """Health NOT_SERVING -> stop accepting -> drain in-flight calls -> close the adapters."""
        await self.grpc.stop()
        await _close_all(self.closers)
        log.info("server_stopped")


async def _close_all(closers: list[Closer]) -> None:
    for close in closers:
        await close()


async def build_server(settings: Settings) -> ServerRuntime:
    """The serving process, listening when this returns; ``PortInUse`` if the address is taken."""
    dynamo = AsyncDynamo.build(settings)
    store = DynamoGraphStore(dynamo, settings)
    cache = build_graph_cache(settings)
    timelines = build_timelines(settings)
    closers: list[Closer] = []
    changes: GraphChanges = NoGraphCache()
    reads: GraphReads = store
    relationships: RelationshipReads = store
    bulk_lists: ListReads = store
    if cache is not None:
        cached = CachedGraphReads(store, cache)
        changes, reads, relationships, bulk_lists = CacheWriteThrough(cache), cached, cached, cached.cold()
        closers += [cached.aclose, cache.aclose]  # fills stop first; then owed invalidations are tried once more
    if timelines is not None:
        closers.append(timelines.aclose)
    closers.append(_closing(dynamo))
    suggester = Suggester(reads, bulk_lists, relationships, cache, settings)
    graph = GraphService(store, changes, reads, relationships, suggester, settings)
    timeline = TimelineService(timelines, DynamoTweetStore(dynamo, settings), relationships, settings)
    try:
        grpc = await start_grpc_server(
            settings.grpc_address, graph, timeline, grace_seconds=settings.shutdown_grace_seconds
        )
    except BaseException:
        await _close_all(closers)
        raise
    if settings.page_token_secret == DEV_PAGE_TOKEN_SECRET and not settings.dynamodb_endpoint:
        log.warning("development_page_token_secret", hint="set SG_PAGE_TOKEN_SECRET: tokens can be forged")
    return ServerRuntime(grpc, cache, closers)


def _closing(dynamo: AsyncDynamo) -> Closer:
    async def close() -> None:
        dynamo.close()

    return close
