"""What every graph-cache operation goes through: the circuit breaker, the bound on calls in
flight, the trust check in a read's round trip, the near cache's fence, the hit and miss counts,
and the epochs that guard fills.

Failure rule: a Redis error never fails a caller. A read that fails is a miss (so is one skipped
because the cache is not trusted: a miss is a read that went to DynamoDB); a write-through
that fails leaves a *pending invalidation* (``invalidations.py``), and until every pending
invalidation has been delivered the cache is not trusted for reads (callers go to DynamoDB).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import structlog
from redis.exceptions import NoScriptError

from graph_service.cache import keys, scripts
from graph_service.cache.near_cache import NearCache
from graph_service.cache.trust import Queue, TrustCheck
from graph_service.redis_client.connect import AnyRedis
from graph_service.redis_client.failures import ANY_FAILURE, retry_torn
from graph_service.telemetry.cache import CacheMetrics

__all__ = ["BREAKER_SECONDS", "CacheCalls"]

log = structlog.get_logger(__name__)
T = TypeVar("T")
BREAKER_SECONDS = 1.0


class CacheCalls:
    """The state and the calls every kind of entry shares; ``GraphCache`` is this plus one mixin per
    kind of entry (``key_entries.py``, ``list_entries.py``, ``count_entries.py``) and the write side
    (``invalidations.py``)."""

    def __init__(
        self,
        redis: AnyRedis,
        *,
        ttl_seconds: int,
        list_limit: int,
        max_in_flight: int = 256,
        near: NearCache | None = None,
        trust: TrustCheck | None = None,
    ) -> None:
        """``trust``: every read checks the cache's trust in its round trip (``cache/trust.py``); the
        processes always pass one (``entrypoints/components.py``), None is for tests of one process."""
        self._redis = redis
        self._near = near
        self._trust = trust
        """The serving process's copy of hot entries (follow states, counts, first pages, relationships), or None."""
        # redis-py raises "Too many connections" past its pool size instead of waiting; a call
        # over the limit waits here for its turn, so a burst never trips the circuit breaker.
        self._in_flight = asyncio.Semaphore(max_in_flight)
        self._ttl = ttl_seconds
        self._list_limit = list_limit
        self._down_until = 0.0
        # owed invalidations: edge -> how many failed write-throughs it has had (see _flush_pending)
        self._pending: dict[tuple[int, int], int] = {}
        self._dropped = False
        self._flusher: asyncio.Task[None] | None = None
        self._write_edge = redis.register_script(scripts.WRITE_EDGE)
        self._fill = redis.register_script(scripts.FILL_IF_EPOCH)
        self._commit_list = redis.register_script(scripts.COMMIT_LIST_FILL)
        self._set_counts = redis.register_script(scripts.SET_COUNTS)
        self._drop = redis.register_script(scripts.DROP)
        self._fill_many = redis.register_script(scripts.FILL_MANY_IF_EPOCH)
        self._repair = redis.register_script(scripts.REPAIR_EDGE)
        self._epoch = redis.register_script(scripts.EPOCH)
        self.hits = 0
        self.misses = 0
        """Every kind but ``privacy``, summed (what tests and benchmarks read); by kind in ``report_to``'s
        metrics. A miss is a read that went to DynamoDB: absent from Redis, Redis failed, or the cache
        was not trusted (breaker open, invalidations owed) so Redis was not asked."""
        self._metrics = CacheMetrics()

    def _count(self, kind: str, hits: int, misses: int) -> None:
        """Count ``hits`` and ``misses`` reads of ``kind`` (the settings entries, ``privacy`` and
        ``account_state``, stay out of the ints: they count the graph's own entries)."""
        if kind not in ("privacy", "account_state"):
            self.hits += hits
            self.misses += misses
        self._metrics.count(kind, hits, misses)

    def report_to(self, metrics: CacheMetrics) -> None:
        """Count hits and misses by kind into ``metrics`` (the process's registry), which also reads
        the circuit breaker and the owed invalidations when scraped."""
        self._metrics = metrics
        metrics.watch(lambda: time.monotonic() < self._down_until, lambda: len(self._pending))

    @property
    def list_limit(self) -> int:
        """Lists longer than this are never cached whole."""
        return self._list_limit

    # -- failure handling -------------------------------------------------------------------

    @property
    def owes(self) -> bool:
        """Invalidations of failed write-throughs are still owed (or were dropped at shutdown)."""
        return bool(self._pending) or self._dropped

    @property
    def trusted(self) -> bool:
        """Reads may use the cache: Redis answers and no invalidation is owed."""
        return not self._pending and time.monotonic() >= self._down_until

    async def _try(self, call: Callable[[], Awaitable[T]], *, essential: bool = False) -> tuple[bool, T | None]:
        """Run one Redis call; (False, None) if Redis failed or the breaker is open.

        ``essential`` calls (a replica's write-through after a committed write) are tried even
        while the breaker is open: other replicas may still read the entries they drop, so
        skipping one would leave a stale entry behind for as long as it stays owed. The price:
        while Redis hangs, each write waits up to the Redis timeout for its invalidation.
        """
        if not essential and time.monotonic() < self._down_until:
            return False, None
        try:
            async with self._in_flight:
                # Every call made here is idempotent: one more try on a torn connection is safe.
                return True, await retry_torn(call, attempts=2)
        except ANY_FAILURE as exc:  # for the failure rule every Redis failure is a miss
            if time.monotonic() >= self._down_until:
                log.warning("redis_unavailable", error=str(exc))
            self._down_until = time.monotonic() + BREAKER_SECONDS
            return False, None

    async def epoch(self, user_id: int) -> str | None:
        """The user's epoch before a store read, or None if a fill must not be tried."""
        return await self._read_epoch(keys.epoch(user_id))

    async def privacy_epoch(self, user_id: int) -> str | None:
        """The epoch of the user's privacy flag, bumped only by privacy changes: the flag of a
        much-followed account would seldom fill under the user's epoch, which every follow bumps."""
        return await self._read_epoch(keys.privacy_epoch(user_id))

    async def _read_epoch(self, key: str) -> str | None:
        if not self.trusted:
            return None
        sha = self._epoch.sha
        ok, values = await self._try(lambda: self._read(lambda pipe: pipe.execute_command("EVALSHA", sha, 1, key)))
        return str(values[0]) if ok and values is not None else None

    async def _read(self, queue: Queue) -> list[object] | None:
        """The replies of the commands ``queue`` puts on a pipeline, after the trust check (None:
        the cache may not be trusted now: a miss that fills nothing)."""
        try:
            return await self._read_once(queue)
        except NoScriptError:  # Redis restarted or flushed its scripts: load the read's ones again
            for source in (scripts.CHECK_TRUST, scripts.EPOCH):
                await self._redis.script_load(source)
            return await self._read_once(queue)

    async def _read_once(self, queue: Queue) -> list[object] | None:
        if self._trust is not None:
            return await self._trust.read(queue)
        pipe = self._redis.pipeline(transaction=False)
        queue(pipe)
        return list(await pipe.execute())

    async def _near_values(self, kind: str, near_keys: list[str], part: object = "") -> list[object] | None:
        """The near cache's values of every key, after a fence (``near_cache.py``), or None: ask Redis."""
        near = self._near
        if near is None or not near.usable:
            return None
        if any(near.get(key, part) is None for key in near_keys):
            near.count(kind, False)
            return None
        # Looked at again after the fence: an invalidation it flushed out has dropped the key.
        values = [near.get(key, part) for key in near_keys] if await near.fence(near_keys) and self.trusted else []
        hit = bool(values) and all(value is not None for value in values)
        near.count(kind, hit)
        return values if hit else None
