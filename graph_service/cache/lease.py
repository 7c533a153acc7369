"""A serving process's lease on the cache's trust (docs/architecture.md, "Trust across replicas").

The problem: a process that committed a write but could not settle the cache (its link to Redis
hangs or is cut, Redis is down or restarting) cannot tell "Redis is down for everyone" from "I
alone cannot reach it". Other processes may still read the entry it could not drop. Failing the
write would break "with Redis down, writes still succeed"; acknowledging it at once lets another
replica answer the old state. So, as with Gray and Cheriton's leases:

- **Lease.** Every serving process holds a lease in ``sgtrust:{trust}:leases``, scored by its expiry on
  Redis's clock, renewed every quarter of ``lease_seconds``. Readers trust the cache only while no
  lease there has expired (``cache/trust.py``). A renewal never revives an expired lease, so a
  renewal held up on the wire cannot extend it past what its holder accounts for.
- **Unsettled write.** A process whose write-through failed (twice: ``CacheWriteThrough``) stops
  renewing that lease, marks it *unsettled* in the store, and acknowledges only once the lease has
  certainly expired: its last renewal's answer plus one lease, plus one more if a renewal was still
  unanswered, plus a margin for clock rates. From then on every reader's check fails. It takes a
  new lease for later writes when Redis answers.
- **No lease in Redis.** A process that cannot reach Redis and holds no lease (it never could,
  since it started) registers one in the store only and marks it unsettled; the keepers renew the
  generation, which expires a lease after each renewal, only while no live lease in the store is
  unsettled or missing from Redis. So the write is acknowledged a lease after the mark, when no
  generation is left for a reader to trust (``cache/trust_keeper.py``). The same holds for a lease
  whose registration in Redis failed (it may still land there, late).
- **Lapsed leases are cleared by their holder**, once it has delivered every invalidation it owes
  (``GraphCache.owes``): then nothing it left unsettled is stale any more, and it removes them.
  Until then it keeps beating them in the store (every lease), which tells the others it is alive:
  a replica cut off from Redis keeps the cache untrusted for everyone, and keeps acknowledging its
  writes, however long the cut lasts.
- **A holder that stops beating** (crashed, or cut off from DynamoDB too) is revoked by the others
  (``cache/trust_keeper.py``), which then empty the cache if it had marked a lease unsettled. A
  holder whose lease was revoked answers an unsettled write ``UNAVAILABLE``: a cache emptied before
  that write committed would not cover it.
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
from graph_service.cache.trust_keeper import TrustKeeper
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
REGISTER_ATTEMPTS = 3
DEAD_AFTER_LEASES = 3
"""A holder whose heartbeat (one a lease) has not moved for this many leases is presumed gone."""
FAILURES: tuple[type[Exception], ...] = (*ANY_FAILURE, Unavailable, ValueError)
"""Redis or the store out of reach (or a registration that found its ID taken, after a retried
write): a round of the lease tried again at the next."""


def lease_seconds_for(redis_timeout_seconds: float) -> float:
    """The lease length: long enough that an ordinary pause (a loaded machine) does not lapse it,
    short enough to keep a write during a partition within a few seconds."""
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
        owes: Callable[[], bool] = lambda: False,
        clock: Callable[[], float] = time.monotonic,
        new_id: Callable[[], str] = new_lease_id,
        metrics: LeaseMetrics | None = None,
    ) -> None:
        """``redis``: a client of the graph cache's Redis whose timeout is longer than a renewal
        takes (a renewal timed out counts as possibly run, which gives the lease up); closed by
        ``aclose``. ``owes``: whether this process still owes the cache invalidations."""
        self._redis = redis
        self._registry = registry
        self.lease_seconds = lease_seconds
        self._owes = owes
        self._clock = clock
        self._new_id = new_id
        self._register_lease = redis.register_script(scripts.REGISTER_LEASE)
        self._renew_lease = redis.register_script(scripts.RENEW_LEASE)
        self._held: _Held | None = None
        self._lapsed: dict[str, float] = {}
        """Leases given up by unsettled writes, not cleared yet: ID -> when it has certainly expired."""
        self._unconfirmed: set[str] = set()
        """Lapsed leases in the store that Redis may never have had (its registration failed, or was
        never tried: ``_register_in_store``), not marked unsettled yet. Their bound counts from the
        first mark: only the generation's expiry makes the readers distrust (``trust_keeper.py``)."""
        self._beaten_at = float("-inf")
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        """Set by ``aclose``: the rounds end even if a cancellation is lost inside a client call."""
        self._first_round = asyncio.Event()
        """Set once the first round has ended (``first_lease``)."""
        self._registering = asyncio.Lock()
        """One registration at a time (the round's, or an unsettled write's)."""
        self._failing_since: float | None = None
        self._metrics = metrics if metrics is not None else LeaseMetrics()
        self._metrics.watch(lambda: self._held is not None)
        self.keeper = TrustKeeper(
            redis,
            registry,
            generation_seconds=lease_seconds,
            dead_after=lease_seconds * DEAD_AFTER_LEASES,
            metrics=self._metrics,
        )
        """Revokes holders gone silent and keeps the generation (every serving process runs one)."""

    @property
    def holding(self) -> str | None:
        """The lease this process renews now, if any."""
        return self._held.lease_id if self._held is not None else None

    @property
    def lapsed(self) -> list[str]:
        """Leases this process gave up and has not cleared yet."""
        return list(self._lapsed)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="cache-lease")

    async def first_lease(self) -> bool:
        """Wait for the first round (at most a lease): a serving process starts answering once it
        holds a lease, since a write it could not settle without one would be refused. False: Redis
        did not let it have one (it serves anyway: reads go to DynamoDB, and it takes one later)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._first_round.wait(), self.lease_seconds)
        if self._held is None:
            log.warning("cache_lease_not_held_at_start")
        return self._held is not None

    async def _run(self) -> None:
        while not self._stopping:
            try:
                await self.tick()
            except Exception:  # a bug or an unexpected answer must not end the lease for good
                log.exception("cache_lease_round_failed")
            self._first_round.set()
            await asyncio.sleep(self.lease_seconds / 4)

    async def tick(self) -> None:
        """One round: take a lease if none is held, else renew it; beat every lease this process
        answers for; clear the lapsed ones once nothing is owed; tend the trust record."""
        failure: Exception | None = None
        try:
            if self._held is None:
                await self._register()
            else:
                await self._renew(self._held)
        except FAILURES as exc:
            failure = exc
        try:
            await self._beat()  # also while Redis is out of reach: this process is alive
            if failure is None:
                if self._lapsed and not self._owes():
                    await self._clear_lapsed()
                await self.keeper.tend(self._clock())
        except FAILURES as exc:
            failure = failure or exc
        if failure is None and self._failing_since is not None:
            log.info("cache_lease_renewed", failed_for=round(self._clock() - self._failing_since, 3))
            self._failing_since = None
        elif failure is not None and self._failing_since is None:
            self._failing_since = self._clock()
            log.warning("cache_lease_failing", error=str(failure) or type(failure).__name__)

    async def _register(self) -> None:
        """The store first, so that the others see this process before its lease can lapse; the
        keepers do not trust a cache while a live lease is missing from Redis, so they wait the few
        milliseconds until it is there."""
        async with self._registering:
            if self._held is None:
                await self._register_now()

    async def _register_now(self) -> None:
        await self._redis.ping()  # no store item for a lease that could not reach Redis anyway
        for _ in range(REGISTER_ATTEMPTS):
            lease_id = self._new_id()
            await self._registry.register(lease_id)
            try:
                await self._register_lease(keys=[keys.TRUST_LEASES], args=[lease_id, int(self.lease_seconds * 1000)])
            except BaseException:  # it may still run, late: the lease is answered for as an unconfirmed one
                self._lapse_unconfirmed(lease_id)
                raise
            answered = self._clock()
            if await self._registry.is_live(lease_id):
                self._held = _Held(lease_id, answered)
                return
            await self._redis.zrem(keys.TRUST_LEASES, lease_id)  # revoked meanwhile: it covers nothing

    async def _register_in_store(self) -> None:
        """A lease in the store only, for an unsettled write of a process that cannot reach Redis
        (it never could, or lost it before a lease was held): its mark holds back every keeper."""
        async with self._registering:
            if self._held is None and not self._lapsed:
                lease_id = self._new_id()
                await self._registry.register(lease_id)
                self._lapse_unconfirmed(lease_id)
                log.warning("cache_lease_in_store_only", lease=lease_id)

    def _lapse_unconfirmed(self, lease_id: str) -> None:
        """Answer for a lease in the store that Redis may not have: lapsed, its bound set at its first mark."""
        self._unconfirmed.add(lease_id)
        self._lapsed[lease_id] = self._clock()

    def _drop_lapsed(self, lease_id: str) -> None:
        self._lapsed.pop(lease_id, None)
        self._unconfirmed.discard(lease_id)

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
        else:  # expired before it was renewed (a stalled process), or removed
            self._give_up(held)

    async def _beat(self) -> None:
        """A heartbeat in the store for each lease this process answers for, once a lease."""
        if self._clock() - self._beaten_at < self.lease_seconds:
            return
        mine = [*([self._held.lease_id] if self._held is not None else []), *self._lapsed]
        for lease_id in mine:
            if not await self._registry.beat(lease_id):
                log.warning("cache_lease_revoked", lease=lease_id)
                self._drop_lapsed(lease_id)
                if self._held is not None and self._held.lease_id == lease_id:
                    self._held = None
        self._beaten_at = self._clock()

    async def _clear_lapsed(self, *, waiting: bool = True) -> None:
        """Every invalidation this process owed is delivered: what its lapsed leases left
        unsettled is settled, so they stop holding the cache's trust back. ``waiting``: writes
        may still be waiting on them (not after the drain)."""
        now = self._clock()
        for lease_id, bound in list(self._lapsed.items()):
            if waiting and now < bound:
                continue
            self._drop_lapsed(lease_id)  # first: no write takes it while it goes
            await self._redis.zrem(keys.TRUST_LEASES, lease_id)
            await self._registry.forget(lease_id)
            log.info("cache_lease_cleared", lease=lease_id)

    def _give_up(self, held: _Held) -> None:
        """Stop renewing ``held``; lapsed from the time by which Redis has certainly let it expire."""
        lease = self.lease_seconds * (1 + CLOCK_RATE_MARGIN)
        bound = held.answered_at + lease * (2 if held.in_flight else 1) + FIXED_MARGIN_SECONDS
        if self._held is held:
            self._held = None
        self._lapsed[held.lease_id] = max(bound, self._lapsed.get(held.lease_id, bound))

    async def settle_failed(self) -> None:
        """A write-through failed after a committed write: return once the write may be acknowledged
        (every reader distrusts the cache until this process has delivered what it owes);
        ``Unavailable`` when it may not (this process could register no lease in the store either,
        or its lease was revoked)."""
        held = self._held
        if held is None and not self._lapsed:  # none at all (never had one): one may be had at once
            with contextlib.suppress(*FAILURES):
                await self._register()
            if self._held is None and not self._lapsed:  # Redis out of reach: the store answers for it
                with contextlib.suppress(*FAILURES):
                    await self._register_in_store()
            held = self._held
        if held is not None:
            lease_id = held.lease_id
            self._give_up(held)
        elif self._lapsed:  # a lapsed lease stays until what this write owes is delivered
            lease_id = max(self._lapsed.items(), key=lambda item: item[1])[0]
        else:
            self._metrics.refused.inc()
            raise Unavailable("the cache could not be settled and this process holds no cache lease")
        unconfirmed = lease_id in self._unconfirmed
        if not await self._registry.mark_unsettled(lease_id):  # after the commit: see the module
            self._drop_lapsed(lease_id)
            self._metrics.refused.inc()
            raise Unavailable(f"the cache could not be settled and cache lease {lease_id} was revoked")
        if unconfirmed and lease_id in self._lapsed:  # no generation outlives the mark by a lease
            marked = self._clock() + self.lease_seconds * (1 + CLOCK_RATE_MARGIN) + FIXED_MARGIN_SECONDS
            self._lapsed[lease_id] = max(marked, self._lapsed[lease_id])
            self._unconfirmed.discard(lease_id)
        bound = self._lapsed.get(lease_id, self._clock())
        self._metrics.acknowledged.inc()
        log.warning("cache_unsettled_write_waits", lease=lease_id, seconds=round(max(0.0, bound - self._clock()), 3))
        await asyncio.sleep(max(0.0, bound - self._clock()))

    async def aclose(self) -> None:
        """Stop renewing and give the lease held back, and the lapsed ones if nothing is owed any
        more (else they stay, to be revoked once this process stops beating them: what they left
        unsettled is then emptied out)."""
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            # Bounded: a client that turns a cancellation into an error of its own (redis-py#4287)
            # would let the round go on; it then ends at the top of its loop.
            await asyncio.wait({self._task}, timeout=self.lease_seconds)
            self._task = None
        held, self._held = self._held, None
        with contextlib.suppress(*FAILURES):
            if held is not None:
                await self._redis.zrem(keys.TRUST_LEASES, held.lease_id)
                await self._registry.forget(held.lease_id)
            if self._lapsed and not self._owes():  # the cache's last owed invalidations went out
                await self._clear_lapsed(waiting=False)
        await self._redis.aclose()
