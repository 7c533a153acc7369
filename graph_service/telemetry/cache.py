"""The graph cache's metrics: hits and misses by kind, and whether reads may use it at all.

Kinds: ``follow_state`` (IsFollowing), ``lists`` (a page of a cached whole adjacency list),
``counts``, ``relationships`` (one per target of GetRelationships), ``privacy`` (a user's
private flag), ``account_state`` (one per account a call names: its lifecycle state). The two
gauges are read when scraped: ``socialgraph_cache_breaker_open`` is 1 while Redis is not asked
after a failure, ``socialgraph_cache_owed_invalidations`` is how many edges have a failed
write-through whose invalidation is still owed (while above 0, reads skip the cache)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge

__all__ = ["KINDS", "NEAR_KINDS", "CacheMetrics", "LeaseMetrics", "NearCacheMetrics"]

KINDS = ("follow_state", "lists", "counts", "relationships", "privacy", "account_state")
NEAR_KINDS = ("follow_state", "lists", "counts", "relationships", "account_state")


class CacheMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        hits = Counter(
            "socialgraph_cache_hits", "Graph cache reads answered by Redis, by kind.", ["kind"], registry=registry
        )
        misses = Counter(
            "socialgraph_cache_misses",
            "Graph cache reads that went to DynamoDB (absent, or Redis failed), by kind.",
            ["kind"],
            registry=registry,
        )
        self.hits = {kind: hits.labels(kind) for kind in KINDS}
        self.misses = {kind: misses.labels(kind) for kind in KINDS}
        self._breaker = Gauge(
            "socialgraph_cache_breaker_open",
            "1 while the graph cache does not ask Redis (for a second after a Redis failure).",
            registry=registry,
        )
        self._owed = Gauge(
            "socialgraph_cache_owed_invalidations",
            "Edges whose cache invalidation is owed after a failed write-through (reads skip the cache meanwhile).",
            registry=registry,
        )

    def count(self, kind: str, hits: int, misses: int) -> None:
        if hits:
            self.hits[kind].inc(hits)
        if misses:
            self.misses[kind].inc(misses)

    def watch(self, breaker_open: Callable[[], bool], owed: Callable[[], int]) -> None:
        """Read the cache's breaker and debt when scraped."""
        self._breaker.set_function(lambda: float(breaker_open()))
        self._owed.set_function(lambda: float(owed()))


class NearCacheMetrics:
    """The serving process's near cache (``graph_service/cache/near_cache.py``): reads it answered
    or not, by kind; fences sent and the reads that waited on them; entries; whether it is usable."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        hits = Counter(
            "socialgraph_near_cache_hits",
            "Reads answered from the process's near cache (after a fence), by kind.",
            ["kind"],
            registry=registry,
        )
        misses = Counter(
            "socialgraph_near_cache_misses",
            "Reads the near cache could not answer (absent, invalidated by the fence, or not usable), by kind.",
            ["kind"],
            registry=registry,
        )
        self._hits = {kind: hits.labels(kind) for kind in NEAR_KINDS}
        self._misses = {kind: misses.labels(kind) for kind in NEAR_KINDS}
        self.fences = Counter(
            "socialgraph_near_cache_fences",
            "PINGs sent on the invalidation connection as read fences.",
            registry=registry,
        )
        self.fence_waits = Counter(
            "socialgraph_near_cache_fence_waits",
            "Reads that waited on a fence (shared by reads at once).",
            registry=registry,
        )
        dropped = Counter(
            "socialgraph_near_cache_dropped",
            "Times the near cache emptied and stopped serving until it tracked again, by reason: a link "
            "lost (closed, failed, hung), or a slot that moved (Redis Cluster).",
            ["reason"],
            registry=registry,
        )
        self.dropped = {reason: dropped.labels(reason) for reason in ("lost", "moved")}
        self._entries = Gauge("socialgraph_near_cache_entries", "Keys held in the near cache.", registry=registry)
        self._usable = Gauge(
            "socialgraph_near_cache_usable",
            "1 while the invalidation connection tracks (else the near cache is bypassed and empty).",
            registry=registry,
        )

    def count(self, kind: str, hit: bool) -> None:
        (self._hits if hit else self._misses)[kind].inc()

    def watch(self, entries: Callable[[], int], usable: Callable[[], bool]) -> None:
        self._entries.set_function(lambda: float(entries()))
        self._usable.set_function(lambda: float(usable()))


class LeaseMetrics:
    """The serving process's cache lease (``graph_service/cache/lease.py``): resets it ran, writes
    whose write-through failed (acknowledged after the lease wait, or refused: lease revoked or
    none), and whether it holds a lease now."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.resets = Counter(
            "socialgraph_cache_resets", "Cache resets this process ran (a lease had lapsed).", registry=registry
        )
        unsettled = Counter(
            "socialgraph_cache_unsettled_writes",
            "Writes whose cache write-through failed, by outcome (acknowledged after the lease wait, or refused).",
            ["outcome"],
            registry=registry,
        )
        self.acknowledged = unsettled.labels("acknowledged")
        self.refused = unsettled.labels("refused")
        self._held = Gauge(
            "socialgraph_cache_lease_held", "1 while this process holds a cache lease.", registry=registry
        )

    def watch(self, held: Callable[[], bool]) -> None:
        self._held.set_function(lambda: float(held()))
