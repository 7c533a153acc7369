"""The caches on a 3-master Redis Cluster: every call works, repeats hit the cache, fill races leave nothing stale."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
from dataclasses import replace

import grpc
import pytest
from redis.cluster import RedisCluster

from graph_service.cache import keys
from graph_service.domain.models import Direction
from graph_service.entrypoints.server import ServerRuntime
from graph_service.settings import Settings
from tests.support.graph_calls import (
    Stub,
    Toggler,
    all_counts,
    assert_cache_agrees,
    batch_counts,
    check_round,
    counts,
    counts_of,
    ids,
    is_following,
    list_page,
    storm,
    truth_edges,
    truth_stub,
    write,
)
from tests.support.polling import eventually
from tests.support.runtimes import make_settings, running_counters, running_server, stub_for
from tests.support.tables import create_tables, wants_streams

pytestmark = pytest.mark.cluster


@pytest.fixture
def cluster(flushed_cluster: RedisCluster) -> RedisCluster:
    return flushed_cluster


@pytest.fixture
async def settings(
    request: pytest.FixtureRequest, dynamodb_local: str, redis_cluster: list[int], cluster: RedisCluster
) -> Settings:
    """Fresh tables, and the flushed cluster as the cache: conftest's server, stub and counters run on it."""
    value = make_settings(dynamodb_local, f"redis://127.0.0.1:{redis_cluster[0]}", redis_cluster=True)
    await create_tables(value, streams=wants_streams(request))
    return value


def node_of(cluster: RedisCluster, user_id: int) -> int:
    return int(cluster.get_node_from_key(keys.epoch(user_id)).port)


def cache_hits(server: ServerRuntime) -> int:
    assert server.cache is not None
    return server.cache.hits


@pytest.mark.streams
async def test_calls_work_on_a_cluster_and_repeats_are_served_from_it(
    stub: Stub, cluster: RedisCluster, server: ServerRuntime, settings: Settings
) -> None:
    """Follow, Unfollow, IsFollowing, both lists and the counts work on a cluster, and repeats hit its cache."""
    users = list(range(1, 25))
    assert len({node_of(cluster, u) for u in users}) == 3  # the users' keys live on all three masters
    hub = 1
    fans = list(range(2, 10))
    idols = list(range(10, 18))
    for fan in fans:
        await write(stub, (fan, hub), True)
    for idol in idols:
        await write(stub, (hub, idol), True)
    chain = list(itertools.pairwise(users[17:]))
    for pair in chain:
        await write(stub, pair, True)
    await write(stub, (5, hub), False)
    await write(stub, (hub, 12), False)
    edges = {(f, hub) for f in fans if f != 5} | {(hub, i) for i in idols if i != 12}
    edges |= set(chain)

    # Follow state: right after each write, and again from the cache.
    probes = [(2, hub), (5, hub), (hub, 10), (hub, 12), (18, 19), (19, 18)]
    for pair in probes:
        assert await is_following(stub, pair) == (pair in edges)
    before = cache_hits(server)
    for pair in probes:
        assert await is_following(stub, pair) == (pair in edges)
        assert cluster.get(keys.follow_state(*pair)) == ("1" if pair in edges else "0")
    assert cache_hits(server) - before == len(probes)

    # Lists: newest first, whole lists cached on the owner's master, repeats and later pages served from it.
    want_followers = [f for f in reversed(fans) if f != 5]
    want_following = [i for i in reversed(idols) if i != 12]
    assert await ids(stub, Direction.FOLLOWERS, hub) == want_followers
    assert await ids(stub, Direction.FOLLOWING, hub) == want_following
    assert cluster.zcard(keys.list_key(Direction.FOLLOWERS, hub)) == len(want_followers) + 1  # and the sentinel
    assert cluster.zcard(keys.list_key(Direction.FOLLOWING, hub)) == len(want_following) + 1
    before = cache_hits(server)
    assert await ids(stub, Direction.FOLLOWERS, hub) == want_followers
    assert await ids(stub, Direction.FOLLOWERS, hub, page_size=3) == want_followers
    assert await ids(stub, Direction.FOLLOWING, hub, page_size=2) == want_following
    assert cache_hits(server) - before == 1 + 3 + 4
    for fan in fans:
        assert await ids(stub, Direction.FOLLOWING, fan) == ([] if fan == 5 else [hub])
        assert cluster.exists(keys.list_key(Direction.FOLLOWING, fan))

    # Writes keep the cached lists right.
    await write(stub, (20, hub), True)
    await write(stub, (3, hub), False)
    edges = (edges | {(20, hub)}) - {(3, hub)}
    want_followers = [20] + [f for f in want_followers if f != 3]
    assert await ids(stub, Direction.FOLLOWERS, hub) == want_followers
    assert len(cluster.zrange(keys.list_key(Direction.FOLLOWERS, hub), 0, -1)) == len(want_followers) + 1

    # Counts: after the consumer catches up, one and many users (pipelined over all masters).
    expected = counts_of(edges, users)
    async with running_counters(settings):
        await eventually(lambda: all_counts(stub, users), lambda got: got == expected, timeout=30)
    assert await batch_counts(stub, users) == expected
    before = cache_hits(server)
    assert await batch_counts(stub, list(reversed(users))) == {u: expected[u] for u in reversed(users)}
    assert cache_hits(server) - before == len(users)
    for user in users:
        assert cluster.hmget(keys.counts(user), ["fl", "fg"]) == [str(n) for n in expected[user]]

    async with truth_stub(settings) as truth:
        stored = await truth_edges(truth, users)
    assert set(stored) == edges
    assert await assert_cache_agrees(settings, stored, users) > 0


@pytest.mark.streams
async def test_cache_fill_races_on_a_cluster_leave_no_stale_entry(
    server: ServerRuntime, cluster: RedisCluster, settings: Settings
) -> None:
    """Readers filling the cluster's cache while writers toggle the same edges leave every entry equal to DynamoDB."""
    users = [1, 2, 3, 4, 5, 6]
    assert len({node_of(cluster, u) for u in users}) >= 2
    serialized = [(1, 2), (4, 1), (6, 3)]  # several writers, one at a time, each reading its own write back
    contended = [(2, 1), (3, 4), (5, 6), (2, 5)]  # several writers at once
    toggled = serialized + contended
    stale: list[str] = []
    toggler = Toggler(serialized, contended, stale)

    rngs = [random.Random(seed) for seed in range(3)]
    async with contextlib.AsyncExitStack() as stack:
        stubs = [await stack.enter_async_context(stub_for(server.port)) for _ in rngs]
        cached = await stack.enter_async_context(stub_for(server.port))
        truth = await stack.enter_async_context(truth_stub(settings))
        # Two rounds (as the single node's test in test_consistency.py) of 3 writers making 8 writes each
        # against 4 readers: more writes or readers only repeat the same races for better odds.
        for round_no in range(2):
            hits_before = cache_hits(server)
            reads, evicted = await storm(
                settings,
                server.port,
                toggled,
                (toggler.writer(stub, rng, 8) for stub, rng in zip(stubs, rngs, strict=True)),
                reader_seeds=range(10 * round_no, 10 * round_no + 4),
                evict_seed=round_no,
            )
            assert sum(reads) > 0
            assert evicted > 0
            assert cache_hits(server) > hits_before  # the readers were answered from the cluster too
            assert stale == []
            edges = await check_round(cached, truth, settings, users, min_checked=1)

        expected = counts_of(set(edges), users)
        async with running_counters(settings):
            await eventually(lambda: all_counts(cached, users), lambda got: got == expected, timeout=30)
        assert await batch_counts(cached, users) == expected
    assert await assert_cache_agrees(settings, edges, users) > 0


async def test_cluster_timeouts_under_load_never_fail_a_call(
    dynamodb_local: str, redis_cluster: list[int], cluster: RedisCluster
) -> None:
    """With cluster calls timing out under load, every call still succeeds and answers right, from DynamoDB."""
    settings = make_settings(
        dynamodb_local, f"redis://127.0.0.1:{redis_cluster[0]}", redis_cluster=True, redis_timeout_seconds=0.005
    )
    await create_tables(settings, streams=True)
    ring = 20  # a ring of 20 follows: every user counts (1, 1); a larger ring only makes the setup longer
    users = list(range(1, ring + 1))
    edges = {(u, u % ring + 1) for u in users}
    # The counters consumer keeps an ordinary timeout: this test is about the service's calls, and a
    # consumer that cannot reach Redis leaves its repairs owed until it can (tested elsewhere).
    consumer_settings = replace(settings, redis_timeout_seconds=1.0)
    async with (
        running_server(settings) as server,
        stub_for(server.port) as stub,
        running_counters(consumer_settings),
    ):
        await asyncio.gather(*(write(stub, pair, True) for pair in edges))
        # One BatchGetCounts a poll (not a GetCounts per user): this wait is only for the consumer.
        await eventually(lambda: batch_counts(stub, users), lambda got: set(got.values()) == {(1, 1)}, timeout=30)
        failures: list[str] = []

        async def client(seed: int) -> None:
            rng = random.Random(seed)
            async with stub_for(server.port) as own:
                # 12 clients at once (the load that keeps Redis calls past 5 ms), 4 rounds each, 192 calls:
                # more rounds only repeat the same fallbacks.
                for _ in range(4):
                    a, b = rng.sample(users, 2)
                    try:
                        assert await is_following(own, (a, b)) == ((a, b) in edges)
                        assert [u for u, _ in (await list_page(own, Direction.FOLLOWING, a))[0]] == [a % ring + 1]
                        assert await counts(own, b) == (1, 1)
                        assert set((await batch_counts(own, rng.sample(users, 10))).values()) == {(1, 1)}
                    except grpc.aio.AioRpcError as exc:
                        failures.append(f"{exc.code().name}: {exc.details()}")

        await asyncio.gather(*(client(seed) for seed in range(12)))
    assert failures == []
