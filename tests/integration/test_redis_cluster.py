"""The caches on a 3-master Redis Cluster: every call works, repeats hit the cache, fill races leave nothing stale."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import re
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import replace

import grpc
import pytest
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc

from graph_service.cache import keys
from graph_service.cache.cached_store import CachedEdgeStore
from graph_service.models import Direction, Edge
from graph_service.server import RunningServer
from graph_service.settings import Settings
from tests.conftest import ensure_tables, make_settings, running_counters, running_server, stub_for
from tests.servers import eventually

pytestmark = pytest.mark.cluster

Stub = pb_grpc.SocialGraphServiceStub
Pair = tuple[int, int]
KEY = re.compile(r"^sg:\{(\d+)\}:(?:fs:(\d+)|(fl|fg|cnt|ep))(:fill:.*|:gone)?$")


@pytest.fixture
def cluster(redis_cluster: list[int]) -> Iterator[RedisCluster]:
    """A client of the session's cluster, flushed for this test."""
    client = RedisCluster(host="127.0.0.1", port=redis_cluster[0], decode_responses=True)
    client.flushall(target_nodes=RedisCluster.PRIMARIES)
    yield client
    client.close()


@pytest.fixture
async def cluster_settings(dynamodb_local: str, redis_cluster: list[int], cluster: RedisCluster) -> Settings:
    value = make_settings(dynamodb_local, f"redis://127.0.0.1:{redis_cluster[0]}", redis_cluster=True)
    await ensure_tables(value)
    return value


@pytest.fixture
async def cluster_server(cluster_settings: Settings) -> AsyncIterator[RunningServer]:
    async with running_server(cluster_settings) as running:
        yield running


@pytest.fixture
async def stub(cluster_server: RunningServer) -> AsyncIterator[Stub]:
    async with stub_for(cluster_server.port) as value:
        yield value


@contextlib.asynccontextmanager
async def truth_stub(settings: Settings) -> AsyncIterator[Stub]:
    """A second server on the same tables with caching off: every answer comes from DynamoDB."""
    plain_settings = replace(settings, redis_url="", redis_cluster=False)
    async with running_server(plain_settings) as plain, stub_for(plain.port) as value:
        yield value


async def write(stub: Stub, pair: Pair, follow: bool) -> None:
    if follow:
        reply = await stub.Follow(pb.FollowRequest(follower_id=pair[0], followee_id=pair[1]))
        assert reply.state == pb.FOLLOW_STATE_FOLLOWING
    else:
        await stub.Unfollow(pb.UnfollowRequest(follower_id=pair[0], followee_id=pair[1]))


async def is_following(stub: Stub, pair: Pair) -> bool:
    return (await stub.IsFollowing(pb.IsFollowingRequest(follower_id=pair[0], followee_id=pair[1]))).following


async def list_page(
    stub: Stub, direction: Direction, user_id: int, page_size: int = 0, token: str = ""
) -> tuple[list[tuple[int, int]], str]:
    """One page as ([(user_id, at_us)], next_page_token)."""
    if direction is Direction.FOLLOWERS:
        reply = await stub.ListFollowers(
            pb.ListFollowersRequest(user_id=user_id, page_size=page_size, page_token=token)
        )
        entries = reply.followers
    else:
        reply = await stub.ListFollowing(
            pb.ListFollowingRequest(user_id=user_id, page_size=page_size, page_token=token)
        )
        entries = reply.following
    return [(e.user_id, e.followed_at.ToMicroseconds()) for e in entries], reply.next_page_token


async def ids(stub: Stub, direction: Direction, user_id: int, page_size: int = 0) -> list[int]:
    """Every user ID of a list, walking all pages."""
    out: list[int] = []
    token = ""
    while True:
        entries, token = await list_page(stub, direction, user_id, page_size, token)
        out.extend(u for u, _ in entries)
        if not token:
            return out


async def counts(stub: Stub, user_id: int) -> tuple[int, int]:
    reply = await stub.GetCounts(pb.GetCountsRequest(user_id=user_id))
    return reply.followers_count, reply.following_count


async def all_counts(stub: Stub, users: Sequence[int]) -> dict[int, tuple[int, int]]:
    values = await asyncio.gather(*(counts(stub, u) for u in users))
    return dict(zip(users, values, strict=True))


async def batch_counts(stub: Stub, users: Sequence[int]) -> dict[int, tuple[int, int]]:
    reply = await stub.BatchGetCounts(pb.BatchGetCountsRequest(user_ids=list(users)))
    assert [c.user_id for c in reply.counts] == list(users)
    return {c.user_id: (c.followers_count, c.following_count) for c in reply.counts}


def positions(edges: dict[Pair, int], kind: str, user: int) -> set[str]:
    """The members a cached list of ``user`` (``fl`` followers, ``fg`` following) must hold."""
    if kind == "fl":
        return {Edge(a, at).position for (a, b), at in edges.items() if b == user}
    return {Edge(b, at).position for (a, b), at in edges.items() if a == user}


def counts_of(edges: set[Pair], users: Sequence[int]) -> dict[int, tuple[int, int]]:
    followers = Counter(b for _, b in edges)
    following = Counter(a for a, _ in edges)
    return {u: (followers[u], following[u]) for u in users}


def node_of(cluster: RedisCluster, user_id: int) -> int:
    return int(cluster.get_node_from_key(keys.epoch(user_id)).port)


def cache_hits(server: RunningServer) -> int:
    assert isinstance(server.store, CachedEdgeStore)
    return server.store.cache.hits


def assert_cluster_agrees(
    cluster: RedisCluster, edges: dict[Pair, int], users: Sequence[int], *, with_counts: bool = True
) -> int:
    """Read every cache key on every master; none may contradict DynamoDB. Returns how many were checked."""
    truth_counts = counts_of(set(edges), users)
    checked = 0
    for key in cluster.scan_iter(match="sg:*", count=1000):
        match = KEY.match(key)
        assert match, f"unexpected cache key {key}"
        owner, followee, kind, suffix = match.groups()
        user = int(owner)
        if kind == "ep" or (suffix or "").startswith(":fill:"):
            continue
        if suffix == ":gone":  # a removed member may never name an edge that exists
            gone = set(cluster.zrange(key, 0, -1))
            assert not gone & positions(edges, kind, user), f"{key} holds a live edge"
            checked += 1
            continue
        if followee is not None:
            value = cluster.get(key)
            if value is not None:
                assert value == ("1" if (user, int(followee)) in edges else "0"), f"{key} = {value}"
                checked += 1
        elif kind in ("fl", "fg"):
            members = cluster.zrange(key, 0, -1)
            if members:
                want = positions(edges, kind, user)
                assert set(members) - {"!"} == want, f"{key} disagrees with DynamoDB"
                checked += 1
        elif with_counts:
            row = cluster.hmget(key, ["fl", "fg"])
            if None not in row:
                assert (int(row[0]), int(row[1])) == truth_counts[user], f"{key} = {row}"
                checked += 1
    return checked


async def test_calls_work_on_a_cluster_and_repeats_are_served_from_it(
    stub: Stub, cluster: RedisCluster, cluster_server: RunningServer, cluster_settings: Settings
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
    before = cache_hits(cluster_server)
    for pair in probes:
        assert await is_following(stub, pair) == (pair in edges)
        assert cluster.get(keys.follow_state(*pair)) == ("1" if pair in edges else "0")
    assert cache_hits(cluster_server) - before == len(probes)

    # Lists: newest first, whole lists cached on the owner's master, repeats and later pages served from it.
    want_followers = [f for f in reversed(fans) if f != 5]
    want_following = [i for i in reversed(idols) if i != 12]
    assert await ids(stub, Direction.FOLLOWERS, hub) == want_followers
    assert await ids(stub, Direction.FOLLOWING, hub) == want_following
    assert cluster.zcard(keys.list_key(Direction.FOLLOWERS, hub)) == len(want_followers) + 1  # and the sentinel
    assert cluster.zcard(keys.list_key(Direction.FOLLOWING, hub)) == len(want_following) + 1
    before = cache_hits(cluster_server)
    assert await ids(stub, Direction.FOLLOWERS, hub) == want_followers
    assert await ids(stub, Direction.FOLLOWERS, hub, page_size=3) == want_followers
    assert await ids(stub, Direction.FOLLOWING, hub, page_size=2) == want_following
    assert cache_hits(cluster_server) - before == 1 + 3 + 4
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
    async with running_counters(cluster_settings):
        await eventually(lambda: all_counts(stub, users), lambda got: got == expected, timeout=30)
    assert await batch_counts(stub, users) == expected
    before = cache_hits(cluster_server)
    assert await batch_counts(stub, list(reversed(users))) == {u: expected[u] for u in reversed(users)}
    assert cache_hits(cluster_server) - before == len(users)
    for user in users:
        assert cluster.hmget(keys.counts(user), ["fl", "fg"]) == [str(n) for n in expected[user]]

    async with truth_stub(cluster_settings) as truth:
        truth_edges = {
            (other, user): at for user in users for other, at in (await list_page(truth, Direction.FOLLOWERS, user))[0]
        }
    assert set(truth_edges) == edges
    assert assert_cluster_agrees(cluster, truth_edges, users) > 0


async def test_cache_fill_races_on_a_cluster_leave_no_stale_entry(
    cluster_server: RunningServer, cluster: RedisCluster, cluster_settings: Settings, redis_cluster: list[int]
) -> None:
    """Readers filling the cluster's cache while writers toggle the same edges leave every entry equal to DynamoDB."""
    users = [1, 2, 3, 4, 5, 6]
    assert len({node_of(cluster, u) for u in users}) >= 2
    serialized = [(1, 2), (4, 1), (6, 3)]  # several writers, one at a time, each reading its own write back
    contended = [(2, 1), (3, 4), (5, 6), (2, 5)]  # several writers at once
    toggled = serialized + contended
    locks = {pair: asyncio.Lock() for pair in serialized}
    stale: list[str] = []

    async def writer(stub: Stub, rng: random.Random) -> None:
        for _ in range(12):
            follow = rng.random() < 0.5
            if rng.random() < 0.5:
                await write(stub, rng.choice(contended), follow)
                continue
            pair = rng.choice(serialized)
            async with locks[pair]:
                await write(stub, pair, follow)
                if await is_following(stub, pair) != follow:
                    stale.append(f"IsFollowing{pair} != {follow}")
                listed = [u for u, _ in (await list_page(stub, Direction.FOLLOWERS, pair[1]))[0]]
                if (pair[0] in listed) != follow:
                    stale.append(f"ListFollowers({pair[1]}) = {listed} after follow={follow} by {pair[0]}")
                listed = [u for u, _ in (await list_page(stub, Direction.FOLLOWING, pair[0]))[0]]
                if (pair[1] in listed) != follow:
                    stale.append(f"ListFollowing({pair[0]}) = {listed} after follow={follow} of {pair[1]}")

    async def reader(stop: asyncio.Event, rng: random.Random) -> int:
        done = 0
        async with stub_for(cluster_server.port) as stub:
            while not stop.is_set():
                a, b = rng.choice(toggled)
                kind = rng.randrange(6)
                if kind < 3:
                    await is_following(stub, (a, b))
                elif kind == 3:
                    await list_page(stub, Direction.FOLLOWERS, b, rng.choice([0, 1]))
                elif kind == 4:
                    await list_page(stub, Direction.FOLLOWING, a, rng.choice([0, 1]))
                else:
                    await counts(stub, a)
                done += 1
        return done

    async def evictor(stop: asyncio.Event, rng: random.Random) -> int:
        """Deletes random entries as expiry or eviction would."""
        candidates = [keys.follow_state(a, b) for a, b in toggled]
        candidates += [keys.list_key(d, u) for d in Direction for u in users]
        client = AsyncRedisCluster(host="127.0.0.1", port=redis_cluster[1])
        deleted = 0
        try:
            while not stop.is_set():
                deleted += await client.delete(rng.choice(candidates))
                await asyncio.sleep(0.002)  # pacing only
        finally:
            await client.aclose()
        return deleted

    pairs = [(a, b) for a in users for b in users if a != b]
    rngs = [random.Random(seed) for seed in range(3)]
    async with contextlib.AsyncExitStack() as stack:
        stubs = [await stack.enter_async_context(stub_for(cluster_server.port)) for _ in rngs]
        cached = await stack.enter_async_context(stub_for(cluster_server.port))
        truth = await stack.enter_async_context(truth_stub(cluster_settings))
        for round_no in range(3):
            hits_before = cache_hits(cluster_server)
            stop = asyncio.Event()
            readers = [asyncio.create_task(reader(stop, random.Random(10 * round_no + i))) for i in range(6)]
            evicting = asyncio.create_task(evictor(stop, random.Random(round_no)))
            try:
                await asyncio.gather(*(writer(stub, rng) for stub, rng in zip(stubs, rngs, strict=True)))
            finally:
                stop.set()
                reads = await asyncio.gather(*readers)
                evicted = await evicting
            assert sum(reads) > 0
            assert evicted > 0
            assert cache_hits(cluster_server) > hits_before  # the readers were answered from the cluster too
            assert stale == []

            edges = {
                (other, user): at
                for user in users
                for other, at in (await list_page(truth, Direction.FOLLOWERS, user))[0]
            }
            assert {p: await is_following(cached, p) for p in pairs} == {p: p in edges for p in pairs}
            for direction in Direction:
                for user in users:
                    assert await list_page(cached, direction, user) == await list_page(truth, direction, user)
                    assert await list_page(cached, direction, user, 1) == await list_page(truth, direction, user, 1)
            assert assert_cluster_agrees(cluster, edges, users, with_counts=False) > 0

        expected = counts_of(set(edges), users)
        async with running_counters(cluster_settings):
            await eventually(lambda: all_counts(cached, users), lambda got: got == expected, timeout=30)
        assert await batch_counts(cached, users) == expected
    assert assert_cluster_agrees(cluster, edges, users) > 0


async def test_cluster_timeouts_under_load_never_fail_a_call(
    dynamodb_local: str, redis_cluster: list[int], cluster: RedisCluster
) -> None:
    """With cluster calls timing out under load, every call still succeeds and answers right, from DynamoDB."""
    settings = make_settings(
        dynamodb_local, f"redis://127.0.0.1:{redis_cluster[0]}", redis_cluster=True, redis_timeout_seconds=0.005
    )
    await ensure_tables(settings)
    users = list(range(1, 41))
    edges = {(u, u % 40 + 1) for u in users}
    async with running_server(settings) as server, stub_for(server.port) as stub:
        await asyncio.gather(*(write(stub, pair, True) for pair in edges))
        async with running_counters(settings):
            await eventually(lambda: all_counts(stub, users), lambda got: set(got.values()) == {(1, 1)}, timeout=30)
        failures: list[str] = []

        async def client(seed: int) -> None:
            rng = random.Random(seed)
            async with stub_for(server.port) as own:
                for _ in range(50):
                    a, b = rng.sample(users, 2)
                    try:
                        assert await is_following(own, (a, b)) == ((a, b) in edges)
                        assert [u for u, _ in (await list_page(own, Direction.FOLLOWING, a))[0]] == [a % 40 + 1]
                        assert await counts(own, b) == (1, 1)
                        assert set((await batch_counts(own, rng.sample(users, 10))).values()) == {(1, 1)}
                    except grpc.aio.AioRpcError as exc:
                        failures.append(f"{exc.code().name}: {exc.details()}")

        await asyncio.gather(*(client(seed) for seed in range(24)))
    assert failures == []
