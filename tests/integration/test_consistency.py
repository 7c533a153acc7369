"""Consistency of cached reads under concurrency: read-your-writes, exact counts, and cache-fill races."""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace

import redis.asyncio as aioredis
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc

from graph_service.cache import keys
from graph_service.models import Direction, Edge
from graph_service.server import RunningServer
from graph_service.settings import Settings
from tests.conftest import running_counters, running_server, stub_for
from tests.servers import eventually

Stub = pb_grpc.SocialGraphServiceStub
Pair = tuple[int, int]
KEY = re.compile(r"^sg:\{(\d+)\}:(?:fs:(\d+)|(fl|fg|cnt|ep))(:fill:.*|:gone)?$")


# -- helpers ------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def truth_stub(settings: Settings) -> AsyncIterator[Stub]:
    """A second server on the same tables with caching off: every answer comes from DynamoDB."""
    async with running_server(replace(settings, redis_url="")) as plain, stub_for(plain.port) as stub:
        yield stub


async def write(stub: Stub, pair: Pair, follow: bool) -> None:
    if follow:
        reply = await stub.Follow(pb.FollowRequest(follower_id=pair[0], followee_id=pair[1]))
        assert reply.state == pb.FOLLOW_STATE_FOLLOWING
    else:
        await stub.Unfollow(pb.UnfollowRequest(follower_id=pair[0], followee_id=pair[1]))


async def is_following(stub: Stub, pair: Pair) -> bool:
    return (await stub.IsFollowing(pb.IsFollowingRequest(follower_id=pair[0], followee_id=pair[1]))).following


async def list_page(stub: Stub, direction: Direction, user_id: int, page_size: int = 0, token: str = "") -> tuple:
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


async def whole_list(stub: Stub, direction: Direction, user_id: int) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    token = ""
    while True:
        entries, token = await list_page(stub, direction, user_id, 1000, token)
        out.extend(entries)
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


async def evict(redis_url: str, pairs: Sequence[Pair], stop: asyncio.Event, seed: int) -> int:
    """Delete random cache entries of ``pairs`` (as TTL expiry or LRU eviction would) until stopped."""
    rng = random.Random(seed)
    users = sorted({u for pair in pairs for u in pair})
    candidates = [keys.follow_state(a, b) for a, b in pairs]
    candidates += [keys.list_key(d, u) for d in Direction for u in users] + [keys.counts(u) for u in users]
    client = aioredis.Redis.from_url(redis_url)
    deleted = 0
    try:
        while not stop.is_set():
            deleted += await client.delete(*rng.sample(candidates, 2))
            await asyncio.sleep(0.002)  # pacing only: keeps the evictor from starving the service
    finally:
        await client.aclose()
    return deleted


async def read_storm(port: int, pairs: Sequence[Pair], stop: asyncio.Event, seed: int) -> int:
    """Random cached reads of ``pairs`` (follow state, first list pages, counts) until stopped; returns how many."""
    rng = random.Random(seed)
    done = 0
    async with stub_for(port) as stub:
        while not stop.is_set():
            a, b = rng.choice(pairs)
            kind = rng.randrange(6)
            if kind < 3:
                await is_following(stub, (a, b))
            elif kind == 3:
                await list_page(stub, Direction.FOLLOWERS, b, rng.choice([0, 1]))
            elif kind == 4:
                await list_page(stub, Direction.FOLLOWING, a, rng.choice([0, 1]))
            else:
                await counts(stub, rng.choice((a, b)))
            done += 1
    return done


async def truth_edges(truth: Stub, users: Sequence[int]) -> dict[Pair, int]:
    """Every edge among ``users`` as DynamoDB has it, with its follow time; both lists must agree."""
    followers: dict[Pair, int] = {}
    following: dict[Pair, int] = {}
    for user in users:
        for other, at in await whole_list(truth, Direction.FOLLOWERS, user):
            followers[(other, user)] = at
        for other, at in await whole_list(truth, Direction.FOLLOWING, user):
            following[(user, other)] = at
    assert followers == following
    return followers


async def assert_redis_agrees(redis_url: str, edges: dict[Pair, int], users: Sequence[int], with_counts: bool) -> int:
    """Read every cache key straight from Redis; none may contradict DynamoDB. Returns how many were checked."""
    truth_counts = counts_of(set(edges), users)
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    checked = 0
    try:
        async for key in client.scan_iter(match="sg:*", count=1000):
            match = KEY.match(key)
            assert match, f"unexpected cache key {key}"
            owner, followee, kind, suffix = match.groups()
            user = int(owner)
            if kind == "ep" or (suffix or "").startswith(":fill:"):
                continue
            if suffix == ":gone":  # a removed member may never name an edge that exists
                gone = set(await client.zrange(key, 0, -1))
                assert not gone & positions(edges, kind, user), f"{key} holds a live edge"
                checked += 1
                continue
            if followee is not None:
                value = await client.get(key)
                if value is not None:
                    expected = "1" if (user, int(followee)) in edges else "0"
                    assert value == expected, f"{key} = {value}, DynamoDB says {expected}"
                    checked += 1
            elif kind in ("fl", "fg"):
                members = await client.zrange(key, 0, -1)
                if not members:
                    continue
                want = positions(edges, kind, user)
                assert set(members) - {"!"} == want, f"{key} disagrees with DynamoDB"
                checked += 1
            elif with_counts:
                row = await client.hmget(key, ["fl", "fg"])
                if None not in row:
                    assert (int(row[0]), int(row[1])) == truth_counts[user], f"{key} = {row}"
                    checked += 1
    finally:
        await client.aclose()
    return checked


# -- tests --------------------------------------------------------------------------------------


async def test_is_following_reads_your_writes_across_concurrent_clients(
    server: RunningServer, settings: Settings, redis_url: str
) -> None:
    """Six concurrent clients each read back exactly what they just wrote, and a fresh client sees every last write."""
    users = list(range(1, 5))
    pairs = [(a, b) for a in users for b in users if a != b]
    clients = 6
    rng = random.Random(1234)
    plans: list[list[tuple[Pair, bool]]] = []
    for c in range(clients):
        owned = pairs[c::clients]  # each pair has exactly one writer
        size = 200 // clients + (1 if c < 200 % clients else 0)
        plans.append([(rng.choice(owned), rng.random() < 0.55) for _ in range(size)])
    assert sum(len(p) for p in plans) == 200
    last: dict[Pair, bool] = {}
    mismatches: list[tuple[Pair, bool, bool]] = []

    async def client(plan: list[tuple[Pair, bool]]) -> None:
        async with stub_for(server.port) as stub:
            for pair, follow in plan:
                await write(stub, pair, follow)
                seen = await is_following(stub, pair)
                if seen != follow:
                    mismatches.append((pair, follow, seen))
                last[pair] = follow

    stop = asyncio.Event()
    readers = [asyncio.create_task(read_storm(server.port, pairs, stop, seed)) for seed in range(6)]
    evictor = asyncio.create_task(evict(redis_url, pairs, stop, 7))
    try:
        await asyncio.gather(*(client(plan) for plan in plans))
    finally:
        stop.set()
        reads = await asyncio.gather(*readers)
        evicted = await evictor
    assert mismatches == []
    assert sum(reads) > 0
    assert evicted > 0

    async with stub_for(server.port) as fresh:
        assert {p: await is_following(fresh, p) for p in last} == last
    async with truth_stub(settings) as truth:
        assert {p: await is_following(truth, p) for p in last} == last


async def test_counts_are_exact_after_a_random_burst_with_duplicates(
    server: RunningServer, settings: Settings, counters: asyncio.Task[None]
) -> None:
    """After 1,000 random follows and unfollows (many repeated), every user's counts equal the true edge counts."""
    users = list(range(101, 141))
    rng = random.Random(2024)
    pool = rng.sample([(a, b) for a in users for b in users if a != b], 150)
    ops = [(rng.choice(pool), rng.random() < 0.6) for _ in range(1000)]
    lanes: list[list[tuple[Pair, bool]]] = [[] for _ in range(16)]
    for pair, follow in ops:
        lanes[pool.index(pair) % 16].append((pair, follow))  # one lane per pair: the final state is known
    model: dict[Pair, bool] = {}
    for pair, follow in ops:
        model[pair] = follow
    model_edges = {p for p, following in model.items() if following}
    assert len(model) < len(ops)  # the burst repeats pairs

    async def lane(plan: list[tuple[Pair, bool]]) -> None:
        async with stub_for(server.port) as stub:
            for pair, follow in plan:
                await write(stub, pair, follow)

    await asyncio.gather(*(lane(plan) for plan in lanes))

    async with truth_stub(settings) as truth:
        edges = await truth_edges(truth, users)
        assert set(edges) == model_edges
        assert {p: await is_following(truth, p) for p in pool} == {p: p in model_edges for p in pool}
    expected = counts_of(model_edges, users)
    assert expected == counts_of(set(edges), users)

    async with stub_for(server.port) as stub:
        await eventually(lambda: all_counts(stub, users), lambda got: got == expected, timeout=30)
        assert await batch_counts(stub, users) == expected
        async with truth_stub(settings) as truth:
            assert await batch_counts(truth, users) == expected


async def check_round(cached: Stub, truth: Stub, redis_url: str, users: Sequence[int]) -> dict[Pair, int]:
    """Right after writes stop, every cached answer and every Redis key agrees with DynamoDB."""
    edges = await truth_edges(truth, users)
    pairs = [(a, b) for a in users for b in users if a != b]
    assert {p: await is_following(cached, p) for p in pairs} == {p: p in edges for p in pairs}
    for direction in Direction:
        for user in users:
            assert await list_page(cached, direction, user) == await list_page(truth, direction, user)
            assert await list_page(cached, direction, user, 1) == await list_page(truth, direction, user, 1)
    await assert_redis_agrees(redis_url, edges, users, with_counts=False)
    return edges


async def test_cache_fill_races_leave_no_stale_entry(server: RunningServer, settings: Settings, redis_url: str) -> None:
    """Readers filling the cache while writers toggle the same edges leave every cached answer equal to DynamoDB."""
    users = [1, 2, 3, 4]
    serialized = [(1, 2), (3, 2), (4, 1)]  # several writers, one at a time, each checking its own write
    contended = [(2, 1), (1, 3), (2, 4)]  # several writers at once
    locks = {pair: asyncio.Lock() for pair in serialized}
    writers, rounds, writes_each = 4, 5, 12
    stale: list[str] = []

    async def writer(stub: Stub, rng: random.Random) -> None:
        for _ in range(writes_each):
            follow = rng.random() < 0.5
            if rng.random() < 0.5:
                await write(stub, rng.choice(contended), follow)
                continue
            pair = rng.choice(serialized)
            async with locks[pair]:
                await write(stub, pair, follow)
                # Read your write through the cache while readers race to fill it.
                if await is_following(stub, pair) != follow:
                    stale.append(f"IsFollowing{pair} != {follow}")
                listed = [u for u, _ in (await list_page(stub, Direction.FOLLOWERS, pair[1]))[0]]
                if (pair[0] in listed) != follow:
                    stale.append(f"ListFollowers({pair[1]}) = {listed} after follow={follow} by {pair[0]}")
                listed = [u for u, _ in (await list_page(stub, Direction.FOLLOWING, pair[0]))[0]]
                if (pair[1] in listed) != follow:
                    stale.append(f"ListFollowing({pair[0]}) = {listed} after follow={follow} of {pair[1]}")

    rngs = [random.Random(seed) for seed in range(writers)]
    async with contextlib.AsyncExitStack() as stack:
        stubs = [await stack.enter_async_context(stub_for(server.port)) for _ in range(writers)]
        cached = await stack.enter_async_context(stub_for(server.port))
        truth = await stack.enter_async_context(truth_stub(settings))
        for round_no in range(rounds):
            stop = asyncio.Event()
            readers = [
                asyncio.create_task(read_storm(server.port, serialized + contended, stop, 100 * round_no + seed))
                for seed in range(8)
            ]
            evictor = asyncio.create_task(evict(redis_url, serialized + contended, stop, round_no))
            try:
                await asyncio.gather(*(writer(stub, rng) for stub, rng in zip(stubs, rngs, strict=True)))
            finally:
                stop.set()
                reads = await asyncio.gather(*readers)
                evicted = await evictor
            assert sum(reads) > 0
            assert evicted > 0
            assert stale == []
            # No counters consumer runs yet, so nothing repairs what the service itself may have left stale.
            edges = await check_round(cached, truth, redis_url, users)

        # Counters follow the stream: within a deadline, cached counts equal the true edge counts.
        expected = counts_of(set(edges), users)
        async with running_counters(settings):
            await eventually(lambda: all_counts(cached, users), lambda got: got == expected, timeout=30)
        assert await batch_counts(cached, users) == expected
        assert await check_round(cached, truth, redis_url, users) == edges
        assert await assert_redis_agrees(redis_url, edges, users, with_counts=True) > 0
