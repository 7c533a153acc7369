"""A serving process's lease on the cache's trust, and the cache reset (docs/architecture.md,
"Trust across replicas").

The problem: a process that committed a write but could not settle the cache (its link to Redis
hangs or is cut, Redis is down or restarting) cannot tell "Redis is down for everyone" from "I
alone cannot reach it". Other processes may still read the entry it could not drop. Failing the
write would break "with Redis down, writes still succeed"; acknowledging it at once lets another
replica answer the old state. So, as with Gray and Cheriton's leases:

- **Lease.** Every serving process holds a lease in ``sg:{trust}:leases``, scored by its expiry on
  Redis's clock, renewed every quarter of ``lease_seconds``. Readers trust the cache only while no
  lease has expired (``cache/trust.py``). A renewal never revives an expired lease, so a renewal
  held up on the wire cannot extend it past what its holder accounts for.
- **Unsettled write.** A process whose write-through failed stops renewing that lease (and takes a
  new one for later writes) and acknowledges only once it has certainly expired: its last
  renewal's answer plus one lease, plus one more if a renewal was still unanswered, plus a margin
  for clock rates. From then on every reader's check fails until a reset.
- **Reset.** Any serving process that finds the cache untrusted (no generation, or an expired
  lease) resets it: deletes the generation, revokes in the store every lease not alive in Redis
  (expired, or unknown to a Redis restarted empty), removes the expired ones, deletes every cache
  entry (``sg:*``) and writes a new generation. Every epoch goes with the entries and comes back
  from Redis's clock, so no fill that read the store before the reset can land after it.
- **Revoked.** A process with an unsettled write reads its own lease in the store *after* its
  commit: revoked means a reset may already have run before the commit, and nothing would
  remove what the write left stale, so the write is answered ``UNAVAILABLE`` (it is committed; a
  retry is idempotent). Live means any later reset comes after the commit and empties the cache.
  This happens only to a process cut off from Redis alone while the others reset; when Redis is
  down for everyone, nobody resets and every write still succeeds, after the lease wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from graph_service.cache import keys, scripts
from graph_service.cache.trust import TrustCheck
from graph_service.domain.errors import Unavailable
from graph_service.domain.ports import LeaseRegistry
from graph_service.redis_client.connect import AnyRedis
from graph_service.redis_client.failures import ANY_FAILURE
from graph_service.telemetry.cache import LeaseMetrics

__all__ = ["CacheLease", "lease_seconds_for"]

log = structlog.get_logger(__name__)

MIN_LEASE_SECONDS = 2.0
LEASE_PER_REDIS_TIMEOUT = 8
CLOCK_RATE_MARGIN = 0.05
"""Clocks (this process's, Redis's) may run this much apart in rate over one lease."""
FIXED_MARGIN_SECONDS = 0.02
RESET_LOCK_MS = 30_000
FLUSH_BATCH = 500
FAILURES: tuple[type[Exception], ...] = (*ANY_FAILURE, Unavailable)
"""Redis or the store out of reach: a round of the lease tried again at the next."""


def lease_seconds_for(redis_timeout_seconds: float) -> float:
    """The lease length: long enough that an ordinary pause (a loaded machine) does not lapse it
    and force a reset, short enough to keep a write during a partition within a few seconds."""
    return max(MIN_LEASE_SECONDS, LEASE_PER_REDIS_TIMEOUT * redis_timeout_seconds)


def new_lease_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


@dataclass
class _Held:
    lease_id: str
    answered_at: float
    """This process's clock when Redis last answered a registration or renewal of it."""
    in_flight: bool = False
    """A renewal was sent and not answered: it may still run, and extend the lease once more."""


class CacheLease:
    def __init__(
        self,
        redis: AnyRedis,
        registry: LeaseRegistry,
        *,
        lease_seconds: float,
        clock: Callable[[], float] = time.monotonic,
        new_id: Callable[[], str] = new_lease_id,
        metrics: LeaseMetrics | None = None,
    ) -> None:
        """``redis``: a client of the graph cache's Redis whose timeout is longer than a renewal
        takes (a renewal timed out counts as possibly run, which gives the lease up); closed by
        ``aclose``."""
        self._redis = redis
        self._registry = registry
        self._trust = TrustCheck(redis)
        self.lease_seconds = lease_seconds
        self._clock = clock
        self._new_id = new_id
        self._register_lease = redis.register_script(scripts.REGISTER_LEASE)
        self._renew_lease = redis.register_script(scripts.RENEW_LEASE)
        self._split_leases = redis.register_script(scripts.SPLIT_LEASES)
        self._held: _Held | None = None
        self._last: tuple[str, float] | None = None
        """The lease given up last and the time by which it has certainly expired."""
        self._task: asyncio.Task[None] | None = None
        self._failing_since: float | None = None
        self.resets = 0
        self._metrics = metrics if metrics is not None else LeaseMetrics()
        self._metrics.watch(lambda: self._held is not None)

    @property
    def holding(self) -> str | None:
        """The lease this process renews now, if any."""
        return self._held.lease_id if self._held is not None else None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="cache-lease")

    async def _run(self) -> None:
        while True:
            await self.tick()
            await asyncio.sleep(self.lease_seconds / 4)

    async def tick(self) -> None:
        """One round: take a lease if none is held, else renew it; reset the cache if it is not trusted."""
        try:
            if self._held is None:
                await self._register()
            else:
                await self._renew(self._held)
            if await self._trust.generation_now() is None:
                await self.reset()
            if self._failing_since is not None:
                log.info("cache_lease_renewed", failed_for=round(self._clock() - self._failing_since, 3))
                self._failing_since = None
        except FAILURES as exc:
            if self._failing_since is None:
                self._failing_since = self._clock()
                log.warning("cache_lease_failing", error=str(exc) or type(exc).__name__)

    async def _register(self) -> None:
        lease_id = self._new_id()
        await self._register_lease(keys=[keys.TRUST_LEASES], args=[lease_id, int(self.lease_seconds * 1000)])
        answered = self._clock()
        await self._registry.register(lease_id)
        self._held = _Held(lease_id, answered)

    async def _renew(self, held: _Held) -> None:
        held.in_flight = True
        try:
            renewed = await self._renew_lease(
                keys=[keys.TRUST_LEASES], args=[held.lease_id, int(self.lease_seconds * 1000)]
            )
        except BaseException:
            self._give_up(held)  # it may still run: given up with the renewal counted as in flight
            raise
        held.in_flight = False
        if held is not self._held:
            return  # given up meanwhile (an unsettled write): its bound counted this renewal
        if renewed:
            held.answered_at = self._clock()
        else:  # expired before it was renewed, or removed by a reset
            self._give_up(held)

    def _give_up(self, held: _Held) -> tuple[str, float]:
        """Stop renewing ``held``; the time by which Redis has certainly let it expire."""
        lease = self.lease_seconds * (1 + CLOCK_RATE_MARGIN)
        bound = held.answered_at + lease * (2 if held.in_flight else 1) + FIXED_MARGIN_SECONDS
        if self._held is held:
            self._held = None
        self._last = (held.lease_id, bound)
        return self._last

    async def settle_failed(self) -> None:
        """A write-through failed after a committed write: return once the write may be acknowledged
        (every reader distrusts the cache until a reset has emptied it); ``Unavailable`` when it may
        not (this process holds no lease, or its lease was revoked)."""
        held = self._held
        last = self._give_up(held) if held is not None else self._last
        if last is None:
            self._metrics.refused.inc()
            raise Unavailable("the cache could not be settled and this process holds no cache lease")
        lease_id, bound = last
        if not await self._registry.is_live(lease_id):
            self._metrics.refused.inc()
            raise Unavailable(f"the cache could not be settled and cache lease {lease_id} was revoked")
        self._metrics.acknowledged.inc()
        log.warning("cache_unsettled_write_waits", lease=lease_id, seconds=round(max(0.0, bound - self._clock()), 3))
        await asyncio.sleep(max(0.0, bound - self._clock()))

    async def reset(self) -> bool:
        """Empty the cache and trust it again (see the module's docstring); False if another
        process's reset is running."""
        redis = self._redis
        if not await redis.set(keys.TRUST_RESET, self._new_id(), nx=True, px=RESET_LOCK_MS):
            return False
        try:
            await redis.delete(keys.TRUST_GENERATION)
            alive, expired = await self._split_leases(keys=[keys.TRUST_LEASES])
            revoked = await self._registry.revoke_all_except(alive)
            if expired:
                await redis.zrem(keys.TRUST_LEASES, *expired)
            flushed = await self._flush()
            await redis.set(keys.TRUST_GENERATION, secrets.token_hex(8))
            self.resets += 1
            self._metrics.resets.inc()
            log.warning("cache_reset", revoked=revoked, expired=expired, entries_deleted=flushed, alive=len(alive))
            return True
        finally:
            with contextlib.suppress(*ANY_FAILURE):
                await redis.delete(keys.TRUST_RESET)

    async def _flush(self) -> int:
        """Delete every cache entry but the trust record; how many."""
        deleted = 0
        batch: list[str] = []
        async for key in self._redis.scan_iter(match=f"{keys.PREFIX}:*", count=1000):
            if str(key).startswith(keys.TRUST_PREFIX):
                continue
            batch.append(str(key))
            if len(batch) >= FLUSH_BATCH:
                deleted += int(await self._redis.unlink(*batch))
                batch = []
        if batch:
            deleted += int(await self._redis.unlink(*batch))
        return deleted

    async def aclose(self) -> None:
        """Stop renewing and give the lease held back (a lease given up by an unsettled write stays,
        to expire, so that the cache is reset)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        held, self._held = self._held, None
        if held is not None:
            with contextlib.suppress(*FAILURES):
                await self._redis.zrem(keys.TRUST_LEASES, held.lease_id)
                await self._registry.forget(held.lease_id)
        await self._redis.aclose()
