"""The cache's trust across replicas (``cache/lease.py``, ``cache/trust.py``) on a real Redis and
DynamoDB Local: leases, the wait of a write whose cache could not be settled, the reset."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import redis.asyncio as aioredis

from graph_service.cache import keys, scripts
from graph_service.cache.graph_cache import GraphCache
from graph_service.cache.lease import CacheLease
from graph_service.cache.trust import TrustCheck
from graph_service.domain.errors import Unavailable
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import CHECKPOINTS
from graph_service.redis_client.connect import build_redis
from graph_service.settings import Settings
from graph_service.store.cache_leases import DynamoLeaseRegistry
from graph_service.timelines import keys as timeline_keys
from tests.support.polling import eventually

LEASE = 0.4


@dataclass
class Parts:
    redis: aioredis.Redis
    registry: DynamoLeaseRegistry
    trust: TrustCheck
    url: str

    def lease(self) -> CacheLease:
        """A serving process's lease, on a client of its own (which ``aclose`` closes)."""
        return CacheLease(aioredis.from_url(self.url, decode_responses=True), self.registry, lease_seconds=LEASE)


@pytest.fixture
async def parts(shared_tables: Settings, redis_url: str) -> AsyncIterator[Parts]:
    dynamo = AsyncDynamo.build(shared_tables)
    client = aioredis.from_url(redis_url, decode_responses=True)
    registry = DynamoLeaseRegistry(dynamo, shared_tables.table(CHECKPOINTS))
    await registry.revoke_all_except([])  # the tests of this module share the registry
    try:
        yield Parts(client, registry, TrustCheck(client), redis_url)
    finally:
        await client.aclose()
        dynamo.close()


async def trusted(parts: Parts) -> bool:
    return await parts.trust.generation_now() is not None


async def test_a_held_lease_keeps_the_cache_trusted_and_one_given_back_leaves_it_so(parts: Parts) -> None:
    lease = parts.lease()
    await lease.tick()
    assert lease.holding is not None
    assert await parts.registry.is_live(lease.holding)
    for _ in range(3):
        await lease.tick()
        assert await trusted(parts)
    held = lease.holding
    await lease.aclose()
    assert not await parts.registry.is_live(held)
    assert await parts.redis.zscore(keys.TRUST_LEASES, held) is None
    assert await trusted(parts)


async def test_an_unsettled_write_is_acknowledged_only_once_no_reader_trusts_the_cache(parts: Parts) -> None:
    lease = parts.lease()
    await lease.tick()
    assert await trusted(parts)
    started = time.monotonic()
    await lease.settle_failed()
    waited = time.monotonic() - started
    assert not await trusted(parts)  # from the acknowledgement on, every reader's check fails
    assert LEASE * 0.5 < waited < LEASE * 3, waited
    assert lease.holding is None  # that lease is given up: it must lapse
    await lease.tick()  # a new one for the next writes, and the reset of the old one
    assert lease.holding is not None
    assert await trusted(parts)
    assert lease.resets == 1


async def test_a_reset_revokes_the_lapsed_lease_and_empties_the_cache_but_not_the_timelines(parts: Parts) -> None:
    keeper, lapsing = parts.lease(), parts.lease()
    await keeper.tick()
    await lapsing.tick()
    await parts.redis.set(keys.follow_state(1, 2), "0")
    await parts.redis.set(keys.epoch(1), "7")
    await parts.redis.rpush(timeline_keys.home(1), 5)
    gone = lapsing.holding
    assert gone is not None
    generation = await parts.redis.get(keys.TRUST_GENERATION)
    keeper.start()  # renews every quarter lease, and resets when it finds the cache untrusted
    try:
        await lapsing.settle_failed()  # lapsing stops renewing its lease and waits until it lapsed
        assert await eventually(lambda: trusted(parts), bool, timeout=10)
    finally:
        await keeper.aclose()
    assert keeper.resets == 1
    assert await parts.redis.get(keys.TRUST_GENERATION) != generation
    assert await parts.redis.get(keys.follow_state(1, 2)) is None
    assert await parts.redis.get(keys.epoch(1)) is None
    assert await parts.redis.lrange(timeline_keys.home(1), 0, -1) == ["5"]
    assert not await parts.registry.is_live(gone)
    # The lapsed lease's holder, cut off from Redis, would now write with nothing to cover it.
    with pytest.raises(Unavailable, match="revoked"):
        await lapsing.settle_failed()


async def test_a_process_that_never_held_a_lease_does_not_acknowledge_an_unsettled_write(parts: Parts) -> None:
    with pytest.raises(Unavailable, match="no cache lease"):
        await parts.lease().settle_failed()


async def test_a_renewal_never_brings_a_lapsed_lease_back(parts: Parts) -> None:
    lease = parts.lease()
    await lease.tick()
    held = lease.holding
    assert held is not None
    await lease.settle_failed()  # lapsed by now
    renew = parts.redis.register_script(scripts.RENEW_LEASE)
    assert await renew(keys=[keys.TRUST_LEASES], args=[held, 60_000]) == 0  # as if held up on the wire
    assert not await trusted(parts)


async def test_a_redis_restarted_empty_is_trusted_only_after_a_reset_revoking_every_lease_it_lost(
    parts: Parts,
) -> None:
    survivor, other = parts.lease(), parts.lease()
    await survivor.tick()
    await other.tick()
    lost = other.holding
    await parts.redis.flushall()  # a Redis restarted empty: no generation, no leases
    assert not await trusted(parts)
    await survivor.tick()  # its lease is gone: it takes a new one, then resets
    assert await trusted(parts)
    assert lost is not None
    assert not await parts.registry.is_live(lost)


async def test_a_fill_that_read_the_store_before_a_reset_cannot_land_after_it(
    parts: Parts, shared_tables: Settings, redis_url: str
) -> None:
    cache = GraphCache(
        build_redis(redis_url, cluster=False, settings=shared_tables),
        ttl_seconds=60,
        list_limit=100,
        trust=TrustCheck(build_redis(redis_url, cluster=False, settings=shared_tables)),
    )
    lease = parts.lease()
    await lease.tick()
    try:
        seen = await cache.epoch(41)  # a missing epoch is made, from Redis's clock, not read as 0
        assert seen is not None
        assert int(seen) > 10**15
        await parts.redis.delete(keys.TRUST_GENERATION)
        assert await lease.reset()
        await cache.fill_follow_state(41, 42, False, seen)  # what it read before the reset
        assert await parts.redis.get(keys.follow_state(41, 42)) is None
        fresh = await cache.epoch(41)
        assert fresh is not None
        assert fresh != seen
        await cache.fill_follow_state(41, 42, True, fresh)
        assert await cache.get_follow_state(41, 42) is True
    finally:
        await cache.aclose()
        await lease.aclose()


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
