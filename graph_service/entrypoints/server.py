"""Builds the gRPC API process (``socialgraph serve``): adapters, services, server."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import structlog

from account_jobs.job import AccountJob
from account_jobs.worker import JobWorker
from graph_service.api.auth import CallersFile
from graph_service.api.server import GrpcServer, start_grpc_server
from graph_service.api.tls import server_credentials
from graph_service.cache.cached_graph import CachedGraphReads
from graph_service.cache.cached_states import CachedAccountStates
from graph_service.cache.graph_cache import GraphCache
from graph_service.cache.lease import CacheLease
from graph_service.cache.write_through import CacheWriteThrough, NoGraphCache
from graph_service.domain.account_ports import AccountForgetting, AccountStates
from graph_service.domain.ports import GraphChanges, GraphReads, ListReads, RelationshipReads
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import TableNames
from graph_service.entrypoints.components import (
    build_cache_lease,
    build_graph_cache,
    build_near_cache,
    build_timelines,
)
from graph_service.entrypoints.metrics_http import MetricsServer, metrics_address, start_metrics_server
from graph_service.entrypoints.rule_limits import rule_limits
from graph_service.entrypoints.span_export import export_spans
from graph_service.limits.follow_budget import RedisFollowBudget, Unlimited
from graph_service.redis_client.connect import graph_cache_redis
from graph_service.rules.graph import graph_rules
from graph_service.rules.home_timeline import HomeTimeline
from graph_service.rules.suggestions import Suggester
from graph_service.settings import Settings
from graph_service.store.account_store import DynamoAccounts
from graph_service.store.graph_store import DynamoGraphStore
from graph_service.telemetry import tracing
from graph_service.telemetry.account_jobs import AccountJobMetrics
from graph_service.telemetry.backend_calls import DynamoCallMetrics, RedisCallMetrics
from graph_service.telemetry.cache import CacheMetrics, LeaseMetrics, NearCacheMetrics
from graph_service.telemetry.limits import LimitMetrics
from graph_service.telemetry.registry import process_registry
from graph_service.telemetry.rpc import RpcMetrics
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
    callers: CallersFile | None = None
    """The callers file in force (None: auth is off)."""
    budget: RedisFollowBudget | None = None
    """The follow rate limit's ledger (None: the limit is off); ``failed_open`` counts follows let through."""
    metrics: MetricsServer | None = None
    """``/metrics``, ``/healthz``, ``/readyz`` (closed last, so a scrape sees the drain)."""
    lease: CacheLease | None = None
    """The process's cache lease (None without Redis)."""

    @property
    def port(self) -> int:
        return self.grpc.port

    @property
    def metrics_port(self) -> int:
        assert self.metrics is not None
        return self.metrics.port

    async def run(self, stop: asyncio.Event) -> None:
        if self.callers is None:
            await stop.wait()
        else:
            await self.callers.watch(stop)
        log.info("shutdown_requested")

    def reload(self) -> None:
        """SIGHUP: read the callers file again now (certificates are re-read at each new connection)."""
        if self.callers is not None:
            self.callers.reload()

    async def aclose(self) -> None:
        """Health NOT_SERVING -> stop accepting -> drain in-flight calls -> close the adapters."""
        await self.grpc.stop()
        await close_all(self.closers)
        log.info("server_stopped")


async def close_all(closers: list[Closer]) -> None:
    """Every adapter closed in turn, also when one fails: a connection that does not close in time
    (a Redis Cluster link under a short SG_REDIS_TIMEOUT_SECONDS, on a loaded machine) must neither
    leave the others open nor fail a shutdown whose calls were all answered. A failure is logged."""
    for close in closers:
        try:
            await close()
        except Exception as exc:  # whatever an adapter's close raises, the next ones still close
            log.warning("adapter_close_failed", closer=getattr(close, "__qualname__", repr(close)), error=repr(exc))


def _budget(settings: Settings, limits: LimitMetrics, redis_calls: RedisCallMetrics) -> RedisFollowBudget | None:
    """The follow rate limit's ledger, in the graph cache's Redis; None when the limit is off."""
    if not settings.follow_rate_limit:
        return None
    redis = graph_cache_redis(settings, redis_calls)
    if redis is None:
        log.warning("follow_rate_limit_off", reason="no Redis (SG_REDIS_URL is empty)")
        return None
    return RedisFollowBudget(redis, metrics=limits)


async def build_server(settings: Settings, *, shared_port: bool = False) -> ServerRuntime:
    """The serving process, listening when this returns (gRPC, and metrics on ``SG_METRICS_ADDRESS``);
    ``PortInUse`` if an address is taken,
    ``SettingsError`` / ``CallersFileError`` / ``TlsFilesError`` if it would serve unsafely or
    its security files cannot be used (nothing is built then)."""
    settings.check_serving()
    callers = (
        CallersFile(settings.auth_tokens_file, every=settings.auth_reload_seconds)
        if settings.auth_tokens_file
        else None
    )
    credentials = (
        server_credentials(settings.tls_cert_file, settings.tls_key_file, settings.tls_client_ca_file)
        if settings.tls_cert_file
        else None
    )
    if callers is None:
        log.warning("auth_off", hint="every caller may call every RPC; set SG_AUTH_TOKENS_FILE")
    # Before any client is built: each asks once, when built, whether to make spans. In every
    # process of SG_SERVE_PROCESSES too (each is a `serve --worker` process that builds itself here).
    tracing.configure_tracing("serve")
    registry = process_registry()
    serving: list[GrpcServer] = []

    def not_ready() -> str | None:
        if not serving:
            return "starting"
        return None if serving[0].serving else "not serving: stopping"

    metrics = await start_metrics_server(metrics_address(settings, "serve"), registry, not_ready)
    limits = LimitMetrics(registry)
    dynamo = AsyncDynamo.build(settings, metrics=DynamoCallMetrics(registry))
    redis_calls = RedisCallMetrics(registry)
    tables = TableNames(settings.table_prefix)
    store = DynamoGraphStore(dynamo, tables)
    accounts = DynamoAccounts(dynamo, tables)
    states: AccountStates = accounts
    cache = build_graph_cache(
        settings, near=build_near_cache(settings, NearCacheMetrics(registry)), redis_calls=redis_calls
    )
    timelines = build_timelines(settings, redis_calls=redis_calls)
    closers: list[Closer] = []
    lease: CacheLease | None = None
    changes: GraphChanges = NoGraphCache()
    reads: GraphReads = store
    relationships: RelationshipReads = store
    bulk_lists: ListReads = store
    if cache is not None:
        cache.report_to(CacheMetrics(registry))
        cache.start()
        cached = CachedGraphReads(store, cache)
        lease = build_cache_lease(settings, dynamo, cache, metrics=LeaseMetrics(registry), redis_calls=redis_calls)
        changes, reads, relationships, bulk_lists = CacheWriteThrough(cache, lease), cached, cached, cached.cold()
        states = CachedAccountStates(accounts, cache)
        closers += [cached.aclose, cache.aclose]  # fills stop first; then owed invalidations are tried once more
        if lease is not None:
            lease.start()
            closers.append(lease.aclose)  # after the last write-through: given back, or left to expire
            await lease.first_lease()
    if timelines is not None:
        closers.append(timelines.aclose)
    budget = _budget(settings, limits, redis_calls)
    if budget is not None:
        closers.append(budget.aclose)
    closers += [_closing(dynamo), metrics.aclose, export_spans]  # the spans of the whole stop, last
    bounds = rule_limits(settings)
    suggester = Suggester(reads, bulk_lists, relationships, cache, bounds, states)
    graph = graph_rules(
        store,
        changes,
        reads,
        relationships,
        suggester,
        bounds,
        budget=budget if budget is not None else Unlimited(),
        mutes=store,
        states=states,
        accounts=accounts,
    )
    timeline = HomeTimeline(timelines, DynamoTweetStore(dynamo, tables), relationships, bounds, states)
    forgetting: list[AccountForgetting] = [f for f in (cache, budget, timelines) if f is not None]
    jobs = JobWorker(
        accounts,
        AccountJob(accounts, changes, forgetting, timelines),
        concurrency=settings.account_jobs,
        poll_seconds=settings.account_job_poll_seconds,
        lease_seconds=settings.account_job_lease_seconds,
        metrics=AccountJobMetrics(registry),
    )
    closers.insert(0, jobs.aclose)  # the jobs stop before the adapters they use close
    try:
        grpc = await start_grpc_server(
            settings.grpc_address,
            graph,
            timeline,
            grace_seconds=settings.shutdown_grace_seconds,
            shared_port=shared_port,
            credentials=credentials,
            authenticator=None if callers is None else callers.authenticator,
            metrics=RpcMetrics(registry),
            limits=limits,
        )
    except BaseException:
        await close_all(closers)
        raise
    serving.append(grpc)
    jobs.start()
    return ServerRuntime(grpc, cache, closers, callers, budget, metrics, lease)


def _closing(dynamo: AsyncDynamo) -> Closer:
    async def close() -> None:
        dynamo.close()

    return close
