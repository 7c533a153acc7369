"""The cache's trust across replicas (``cache/lease.py``, ``cache/trust_keeper.py``,
``cache/trust.py``) on a real Redis and DynamoDB Local: leases, the wait of a write whose cache
could not be settled, a holder that owes, a holder gone silent, a Redis that lost its leases."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis.asyncio as aioredis
from socialgraph_devstack.processes import free_port

from graph_service.cache import keys, scripts
from graph_service.cache.graph_cache import GraphCache
from graph_service.cache.lease import CacheLease
from graph_service.cache.trust import TrustCheck
from graph_service.cache.trust_keeper import TrustKeeper
from graph_service.domain.models import LeaseRecord
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import CHECKPOINTS
from graph_service.redis_client.connect import build_redis
from graph_service.settings import Settings
from graph_service.store.cache_leases import DynamoLeaseRegistry
from graph_service.telemetry.cache import LeaseMetrics
from graph_service.timelines import keys as timeline_keys
from tests.support.polling import eventually

LEASE = 0.6


@dataclass
class Parts:
    redis: aioredis.Redis
    registry: DynamoLeaseRegistry
    trust: TrustCheck
    url: str
    made: list[CacheLease] = field(default_factory=list)

    def lease(self, owes: Callable[[], bool] = lambda: False) -> CacheLease:
        """A serving process's lease, on a client of its own (which ``aclose`` closes)."""
        made = CacheLease(
            aioredis.from_url(self.url, decode_responses=True), self.registry, lease_seconds=LEASE, owes=owes
        )
        self.made.append(made)
        return made


@pytest.fixture
async def parts(shared_tables: Settings, redis_url: str) -> AsyncIterator[Parts]:
    dynamo = AsyncDynamo.build(shared_tables)
    client = aioredis.from_url(redis_url, decode_responses=True)
    registry = DynamoLeaseRegistry(dynamo, shared_tables.table(CHECKPOINTS))
    for lease_id, record in (await registry.live_leases()).items():  # earlier tests' leases
        await registry.revoke(lease_id, record.beat)
    made = Parts(client, registry, TrustCheck(client), redis_url)
    try:
        yield made
    finally:
        for lease in made.made:
            await lease.aclose()
        await client.aclose()
        dynamo.close()


async def trusted(parts: Parts) -> bool:
    return await parts.trust.generation_now() is not None


async def test_a_held_lease_keeps_the_cache_trusted_and_one_given_back_leaves_it_so(parts: Parts) -> None:
    lease = parts.lease()
    await lease.tick()
    held = lease.holding
    assert held is not None
    assert await parts.registry.is_live(held)
    for _ in range(3):
        await lease.tick()
        assert await trusted(parts)
    await lease.aclose()
    assert not await parts.registry.is_live(held)
    assert await parts.redis.zscore(keys.TRUST_LEASES, held) is None
    assert await trusted(parts)


async def test_an_unsettled_write_waits_until_no_reader_trusts_the_cache_and_its_holder_clears_it(
    parts: Parts,
) -> None:
    owed = [True]
    lease = parts.lease(owes=lambda: owed[0])
    await lease.tick()
    first = lease.holding
    assert await trusted(parts)
    await lease.settle_failed()
    assert not await trusted(parts)  # from the acknowledgement on, every reader's check fails
    assert lease.lapsed == [first]
    await lease.tick()  # a new lease for later writes; the lapsed one stays while invalidations are owed
    assert lease.holding not in (None, first)
    assert not await trusted(parts)
    owed[0] = False  # delivered
    await lease.tick()
    assert lease.lapsed == []
    assert await trusted(parts)
    assert lease.keeper.resets == 0  # its holder settled it: nothing to empty


async def test_a_holder_that_still_owes_keeps_the_cache_untrusted_for_as_long_as_it_beats(parts: Parts) -> None:
    """A replica cut off from Redis alone: the others do not revoke it, and it goes on answering."""
    cut_off, other = parts.lease(owes=lambda: True), parts.lease()
    await cut_off.tick()
    await other.tick()
    await cut_off.settle_failed()
    lapsed = cut_off.lapsed[0]

    async def rounds() -> float:
        await cut_off.tick()
        await other.tick()
        return (await parts.registry.live_leases())[lapsed].beat

    await eventually(rounds, lambda beats: beats >= 4, timeout=30, interval=LEASE / 4)  # past dead_after
    assert await parts.registry.is_live(lapsed)
    assert not await trusted(parts)
    await cut_off.settle_failed()  # and its writes are still acknowledged


async def test_a_silent_holder_s_unsettled_lease_is_revoked_and_the_cache_emptied(parts: Parts) -> None:
    gone, keeper = parts.lease(owes=lambda: True), parts.lease()
    await gone.tick()
    await keeper.tick()
    await parts.redis.set(keys.follow_state(1, 2), "0")
    await parts.redis.rpush(timeline_keys.home(1), 5)
    await gone.settle_failed()  # then it stops beating: a crash
    lapsed = gone.lapsed[0]

    async def revoked() -> bool:
        await keeper.tick()
        return not await parts.registry.is_live(lapsed)

    await eventually(revoked, bool, timeout=30, interval=LEASE / 4)
    await keeper.tick()
    assert await trusted(parts)
    assert keeper.keeper.resets == 1
    assert await parts.redis.get(keys.follow_state(1, 2)) is None
    assert await parts.redis.lrange(timeline_keys.home(1), 0, -1) == ["5"]  # timelines are not the cache's
    await gone.tick()  # were it alive after all: it learns its lease was revoked, and takes another
    assert gone.lapsed == []
    assert gone.holding not in (None, lapsed)


async def test_a_silent_holder_that_left_nothing_unsettled_is_revoked_without_emptying(parts: Parts) -> None:
    gone, keeper = parts.lease(), parts.lease()
    await gone.tick()
    await keeper.tick()
    held = gone.holding
    assert held is not None
    await parts.redis.set(keys.follow_state(3, 4), "1")

    async def revoked() -> bool:
        await keeper.tick()  # gone never renews again: a kill -9
        return not await parts.registry.is_live(held)

    await eventually(revoked, bool, timeout=30, interval=LEASE / 4)
    await keeper.tick()
    assert await trusted(parts)
    assert keeper.keeper.resets == 0
    assert await parts.redis.get(keys.follow_state(3, 4)) == "1"


def unreachable_lease(parts: Parts) -> CacheLease:
    """A serving process whose Redis URL nothing answers at (it never reached Redis)."""
    made = CacheLease(
        aioredis.from_url(f"redis://127.0.0.1:{free_port()}/0", socket_connect_timeout=0.2),
        parts.registry,
        lease_seconds=LEASE,
    )
    parts.made.append(made)
    return made


async def test_a_process_that_never_reached_redis_acknowledges_once_no_reader_trusts_the_cache(
    parts: Parts,
) -> None:
    """Its lease is in the store only, marked unsettled: the keepers stop renewing the generation,
    which is gone a lease later; it stays gone while the holder beats, and when the holder goes
    silent it is revoked and the cache emptied (whatever it left unsettled is gone with it)."""
    keeper = parts.lease()
    keeper.start()  # a replica that reaches Redis, tending the trust record every quarter lease
    assert await keeper.first_lease()
    await parts.redis.set(keys.follow_state(61, 62), "0")
    assert await trusted(parts)
    cut_off = unreachable_lease(parts)
    await cut_off.settle_failed()
    assert not await trusted(parts)
    (stored,) = cut_off.lapsed
    assert (await parts.registry.live_leases())[stored].unsettled
    await eventually(  # past dead_after: a holder that beats is never revoked
        lambda: _beats_after_a_round(cut_off, parts, stored), lambda beats: beats >= 4, timeout=30, interval=LEASE / 4
    )
    assert not await trusted(parts)
    seconds, micros = await parts.redis.time()
    landed = {stored: seconds * 1000 + micros // 1000 + int(LEASE * 1000)}
    await parts.redis.zadd(keys.TRUST_LEASES, landed)  # as a registration of it would, landing late
    await keeper.keeper.tend(0.0)
    assert not await trusted(parts)  # it is marked unsettled: that alone holds every keeper back
    await cut_off.settle_failed()  # its later writes are acknowledged too
    await eventually(lambda: parts.registry.is_live(stored), lambda live: not live, timeout=30)  # then it dies
    await eventually(lambda: trusted(parts), bool, timeout=30)
    assert keeper.keeper.resets == 1
    assert await parts.redis.get(keys.follow_state(61, 62)) is None


async def _beats_after_a_round(lease: CacheLease, parts: Parts, lease_id: str) -> int:
    await lease.tick()
    return (await parts.registry.live_leases())[lease_id].beat


class StalledRegistry:
    """The store's leases as a keeper's round reads them, the answer held back until ``release``."""

    def __init__(self, inner: DynamoLeaseRegistry) -> None:
        self.inner = inner
        self.read = asyncio.Event()
        self.release = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def live_leases(self) -> dict[str, LeaseRecord]:
        leases = await self.inner.live_leases()
        self.read.set()
        await self.release.wait()
        return leases


async def test_a_keeper_round_that_read_the_store_before_the_mark_keeps_no_generation_past_a_lease(
    parts: Parts,
) -> None:
    """A round reads Redis's clock, then the store (no unsettled lease yet), then stalls; meanwhile
    a process with no lease in Redis marks one and waits its lease; the stalled round renews the
    generation late, but only until a lease after the clock it read, so the write's acknowledgement
    still finds no generation to trust."""
    stalled = StalledRegistry(parts.registry)
    keeper = TrustKeeper(parts.redis, stalled, generation_seconds=LEASE, dead_after=30, metrics=LeaseMetrics())
    stalled.release.set()
    await keeper.tend(0.0)  # a replica's round, its own lease aside (it must not lapse meanwhile)
    assert await trusted(parts)
    stalled.release.clear()
    stalled.read.clear()
    round_ = asyncio.create_task(keeper.tend(1.0))
    await stalled.read.wait()
    cut_off = unreachable_lease(parts)
    write = asyncio.create_task(cut_off.settle_failed())
    await eventually(
        lambda: parts.registry.live_leases(), lambda live: any(r.unsettled for r in live.values()), timeout=10
    )
    await asyncio.sleep(LEASE / 2)  # the scenario: the round stalls half a lease past the mark
    stalled.release.set()
    await round_
    await write
    assert not await trusted(parts)


async def test_a_renewal_never_brings_a_lapsed_lease_back(parts: Parts) -> None:
    lease = parts.lease()
    await lease.tick()
    held = lease.holding
    assert held is not None
    await lease.settle_failed()  # lapsed by now
    renew = parts.redis.register_script(scripts.RENEW_LEASE)
    assert await renew(keys=[keys.TRUST_LEASES], args=[held, 60_000]) == 0  # as if held up on the wire
    assert not await trusted(parts)


async def test_a_redis_that_lost_its_data_is_emptied_and_trusted_once_every_live_holder_is_back(
    parts: Parts,
) -> None:
    first, second = parts.lease(), parts.lease()
    await first.tick()
    await second.tick()
    await parts.redis.set(keys.TRUST_RUN, "another-run")  # as a restart, failover or restore shows it
    await parts.redis.zrem(keys.TRUST_LEASES, second.holding or "")  # a lease the restart lost
    await first.tick()
    assert first.keeper.resets == 1
    assert not await trusted(parts)  # second's lease is live in the store, missing in Redis

    async def back() -> bool:
        await second.tick()  # its renewal fails: it takes a new lease there
        await first.tick()
        return await trusted(parts)

    await eventually(back, bool, timeout=30, interval=LEASE / 4)


async def test_a_fill_that_read_the_store_before_an_emptying_cannot_land_after_it(
    parts: Parts, shared_tables: Settings, redis_url: str
) -> None:
    cache = GraphCache(
        build_redis(redis_url, cluster=False, settings=shared_tables),
        ttl_seconds=60,
        list_limit=100,
        trust=TrustCheck(build_redis(redis_url, cluster=False, settings=shared_tables)),
    )
    # Rounds by hand: a lease long enough that the generation they keep outlives a loaded machine's
    # pause between them (a generation lives one lease after its round: cache/trust_keeper.py).
    lease = CacheLease(aioredis.from_url(parts.url, decode_responses=True), parts.registry, lease_seconds=5.0)
    parts.made.append(lease)
    await lease.tick()
    try:
        seen = await cache.epoch(41)  # a missing epoch is made, from Redis's clock, not read as 0
        assert seen is not None
        assert int(seen) > 10**15
        assert await lease.keeper.empty()
        await lease.tick()
        await cache.fill_follow_state(41, 42, False, seen)  # what it read before the emptying
        assert await parts.redis.get(keys.follow_state(41, 42)) is None
        fresh = await cache.epoch(41)
        assert fresh is not None
        assert fresh != seen
        await cache.fill_follow_state(41, 42, True, fresh)
        assert await cache.get_follow_state(41, 42) is True
    finally:
        await cache.aclose()


async def test_reads_miss_while_the_cache_is_not_trusted(parts: Parts, shared_tables: Settings, redis_url: str) -> None:
    cache = GraphCache(
        build_redis(redis_url, cluster=False, settings=shared_tables),
        ttl_seconds=60,
        list_limit=100,
        trust=TrustCheck(build_redis(redis_url, cluster=False, settings=shared_tables)),
    )
    try:
        await parts.redis.set(keys.follow_state(51, 52), "1")
        assert await cache.get_follow_state(51, 52) is True
        await parts.redis.delete(keys.TRUST_GENERATION)
        assert await cache.get_follow_state(51, 52) is None
        assert await cache.epoch(51) is None  # and nothing is filled
        await parts.redis.set(keys.TRUST_GENERATION, "again")
        assert await eventually(lambda: cache.get_follow_state(51, 52), lambda v: v is True, timeout=5)
    finally:
        await cache.aclose()
