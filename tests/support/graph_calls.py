"""Calls of the gRPC API and checks of the Redis cache against DynamoDB, shared by the integration tests."""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

import grpc
import pytest
import redis.asyncio as aioredis
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc

from graph_service.cache import keys
from graph_service.cache.keys import TRUST_PREFIX
from graph_service.domain.models import Direction, Edge
from graph_service.settings import Settings
from tests.support.runtimes import running_server, stub_for

Stub = pb_grpc.SocialGraphServiceStub
Pair = tuple[int, int]  # (follower_id, followee_id)
Entry = tuple[int, int]  # (user_id, followed_at in microseconds)
DOMAIN = "socialgraph.v1"
FLAGS = (  # a Relationship's
    "following",
    "followed_by",
    "requested",
    "requested_by",
    "blocking",
    "blocked_by",
    "muting",
    "muting_notifications",
)
KEY = re.compile(r"^sg:\{(\d+)\}:(?:(fs|rl|mu):(\d+)|(fl|fg|cnt|ep|pe|pv|sg|st))(:fill:.*|:gone)?$")


# -- calls --------------------------------------------------------------------------------------


def error_info(error: grpc.aio.AioRpcError) -> error_details_pb2.ErrorInfo:
    """The one ErrorInfo (in the service's domain) of a failed call, from its google.rpc.Status."""
    status = rpc_status.from_call(cast("grpc.Call", error))  # an AioRpcError has the methods it reads
    assert status is not None, f"no google.rpc.Status on {error.code()}: {error.details()}"
    assert status.code == error.code().value[0]
    infos = []
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            infos.append(info)
    assert len(infos) == 1, f"expected exactly one ErrorInfo, got {infos}"
    assert infos[0].domain == DOMAIN
    return infos[0]


async def rejected(call: Awaitable[Any], code: grpc.StatusCode, reason: str) -> error_details_pb2.ErrorInfo:
    """Await ``call``, expect it to fail with ``code`` and ErrorInfo ``reason``; return the ErrorInfo."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    assert caught.value.code() == code, caught.value.details()
    info = error_info(caught.value)
    assert info.reason == reason, info
    return info


async def follow(stub: Stub, follower: int, followee: int) -> int:
    """Follow; the FollowState the service answered."""
    return int((await stub.Follow(pb.FollowRequest(follower_id=follower, followee_id=followee))).state)


async def unfollow(stub: Stub, follower: int, followee: int) -> None:
    await stub.Unfollow(pb.UnfollowRequest(follower_id=follower, followee_id=followee))


async def block(stub: Stub, blocker: int, blocked_id: int) -> None:
    await stub.Block(pb.BlockRequest(blocker_id=blocker, blocked_id=blocked_id))


async def unblock(stub: Stub, blocker: int, blocked_id: int) -> None:
    await stub.Unblock(pb.UnblockRequest(blocker_id=blocker, blocked_id=blocked_id))


async def set_private(stub: Stub, user: int, private: bool) -> None:
    await stub.SetPrivacy(pb.SetPrivacyRequest(user_id=user, private=private))


async def accept(stub: Stub, user: int, requester: int) -> None:
    await stub.AcceptFollowRequest(pb.AcceptFollowRequestRequest(user_id=user, requester_id=requester))


async def reject(stub: Stub, user: int, requester: int) -> None:
    await stub.RejectFollowRequest(pb.RejectFollowRequestRequest(user_id=user, requester_id=requester))


async def remove_follower(stub: Stub, user: int, follower_id: int) -> None:
    await stub.RemoveFollower(pb.RemoveFollowerRequest(user_id=user, follower_id=follower_id))


@contextlib.asynccontextmanager
async def truth_stub(settings: Settings) -> AsyncIterator[Stub]:
    """A second server on the same tables with caching off: every answer comes from DynamoDB."""
    plain_settings = replace(settings, redis_url="", redis_cluster=False)
    async with running_server(plain_settings) as plain, stub_for(plain.port) as stub:
        yield stub


async def write(stub: Stub, pair: Pair, follow: bool) -> None:
    """Follow or unfollow, so that a random plan of writes is one call each."""
    if follow:
        reply = await stub.Follow(pb.FollowRequest(follower_id=pair[0], followee_id=pair[1]))
        assert reply.state == pb.FOLLOW_STATE_FOLLOWING
    else:
        await stub.Unfollow(pb.UnfollowRequest(follower_id=pair[0], followee_id=pair[1]))


async def is_following(stub: Stub, pair: Pair) -> bool:
    """IsFollowing of a pair, as a plain bool to compare with a model."""
    return (await stub.IsFollowing(pb.IsFollowingRequest(follower_id=pair[0], followee_id=pair[1]))).following


async def list_page(
    stub: Stub, direction: Direction, user_id: int, page_size: int = 0, token: str = ""
) -> tuple[list[Entry], str]:
    """One page of either list as ([(user_id, at_us)], next_page_token), comparable across servers."""
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


async def walk(
    stub: Stub,
    direction: Direction,
    user_id: int,
    page_size: int,
    between_pages: Callable[[], Awaitable[None]] | None = None,
) -> list[list[Entry]]:
    """All pages of a list, from the first to the one with an empty next_page_token."""
    pages: list[list[Entry]] = []
    token = ""
    while True:
        entries, token = await list_page(stub, direction, user_id, page_size, token)
        pages.append(entries)
        if not token:
            return pages
        if between_pages is not None:
            await between_pages()


async def whole_list(stub: Stub, direction: Direction, user_id: int, page_size: int = 1000) -> list[Entry]:
    """Every entry of a list, walking all pages, for lists longer than one page."""
    return [entry for page in await walk(stub, direction, user_id, page_size) for entry in page]


async def ids(stub: Stub, direction: Direction, user_id: int, page_size: int = 0) -> list[int]:
    """Every user ID of a list, walking all pages, where only the order of users matters."""
    return [u for u, _ in await whole_list(stub, direction, user_id, page_size)]


async def counts(stub: Stub, user_id: int) -> tuple[int, int]:
    """GetCounts as (followers, following), comparable with ``counts_of``."""
    reply = await stub.GetCounts(pb.GetCountsRequest(user_id=user_id))
    return reply.followers_count, reply.following_count


async def all_counts(stub: Stub, users: Sequence[int]) -> dict[int, tuple[int, int]]:
    """GetCounts of many users at once, a probe for ``eventually`` while the consumer catches up."""
    values = await asyncio.gather(*(counts(stub, u) for u in users))
    return dict(zip(users, values, strict=True))


async def batch_counts(stub: Stub, users: Sequence[int]) -> dict[int, tuple[int, int]]:
    """BatchGetCounts, checking the answer keeps the order asked for."""
    reply = await stub.BatchGetCounts(pb.BatchGetCountsRequest(user_ids=list(users)))
    assert [c.user_id for c in reply.counts] == list(users)
    return {c.user_id: (c.followers_count, c.following_count) for c in reply.counts}


# -- the truth ----------------------------------------------------------------------------------


def positions(edges: dict[Pair, int], kind: str, user: int) -> set[str]:
    """The members a cached list of ``user`` (``fl`` followers, ``fg`` following) must hold."""
    if kind == "fl":
        return {Edge(a, at).position for (a, b), at in edges.items() if b == user}
    return {Edge(b, at).position for (a, b), at in edges.items() if a == user}


def counts_of(edges: set[Pair], users: Sequence[int]) -> dict[int, tuple[int, int]]:
    """The counts ``users`` must have given ``edges``, to compare with what the service answers."""
    followers = Counter(b for _, b in edges)
    following = Counter(a for a, _ in edges)
    return {u: (followers[u], following[u]) for u in users}


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


# -- the cache ----------------------------------------------------------------------------------


def cache_client(settings: Settings) -> aioredis.Redis | AsyncRedisCluster:
    """A client of the server's cache (single node or cluster) without the server's short timeouts."""
    if settings.redis_cluster:
        return AsyncRedisCluster.from_url(settings.redis_url, decode_responses=True)
    return aioredis.Redis.from_url(settings.redis_url, decode_responses=True)


async def assert_cache_agrees(
    settings: Settings, edges: dict[Pair, int], users: Sequence[int], *, with_counts: bool = True
) -> int:
    """Read every cache key straight from Redis; none may contradict DynamoDB. Returns how many were checked."""
    truth_counts = counts_of(set(edges), users)
    client = cache_client(settings)
    checked = 0
    try:
        async for key in client.scan_iter(match="sg:*", count=1000):
            if key.startswith(TRUST_PREFIX):
                continue  # the cache's trust record (cache/trust.py), not an entry
            match = KEY.match(key)
            assert match, f"unexpected cache key {key}"
            owner, pair_kind, other, kind, suffix = match.groups()
            user = int(owner)
            if kind in ("ep", "pe", "pv", "sg", "st") or pair_kind == "mu" or (suffix or "").startswith(":fill:"):
                continue  # settings, suggestions and mutes are checked by their own tests
            if pair_kind == "rl":  # these storms make edges only: the other four flags stay clear
                value = await client.get(key)
                if value is not None:
                    flags = (user, int(other)) in edges, (int(other), user) in edges
                    expected = "".join("1" if f else "0" for f in flags) + "0000"
                    assert value == expected, f"{key} = {value}, DynamoDB says {expected}"
                    checked += 1
                continue
            followee = other
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


# -- storms: concurrent writes while readers fill the cache and entries are evicted -------------


async def evict(settings: Settings, pairs: Sequence[Pair], stop: asyncio.Event, seed: int) -> int:
    """Delete random cache entries of ``pairs`` (as TTL expiry or LRU eviction would) until stopped."""
    rng = random.Random(seed)
    users = sorted({u for pair in pairs for u in pair})
    candidates = [keys.follow_state(a, b) for a, b in pairs]
    candidates += [keys.list_key(d, u) for d in Direction for u in users] + [keys.counts(u) for u in users]
    client = cache_client(settings)
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


async def storm(
    settings: Settings,
    port: int,
    pairs: Sequence[Pair],
    writers: Iterable[Coroutine[Any, Any, None]],
    *,
    reader_seeds: Iterable[int],
    evict_seed: int,
) -> tuple[list[int], int]:
    """Run ``writers`` while a ``read_storm`` per seed and an ``evict`` race them; returns (reads each, evicted)."""
    stop = asyncio.Event()
    readers = [asyncio.create_task(read_storm(port, pairs, stop, seed)) for seed in reader_seeds]
    evictor = asyncio.create_task(evict(settings, pairs, stop, evict_seed))
    try:
        await asyncio.gather(*writers)
    finally:
        stop.set()
        reads = await asyncio.gather(*readers)
        evicted = await evictor
    return reads, evicted


@dataclass
class Toggler:
    """Writers that toggle ``contended`` edges at once and ``serialized`` ones in turn, reading each of those back."""

    serialized: list[Pair]
    contended: list[Pair]
    stale: list[str]
    locks: dict[Pair, asyncio.Lock] = field(init=False)

    def __post_init__(self) -> None:
        self.locks = {pair: asyncio.Lock() for pair in self.serialized}

    async def writer(self, stub: Stub, rng: random.Random, writes: int) -> None:
        """Make ``writes`` random writes; every read-back that misses its own write is noted in ``stale``."""
        for _ in range(writes):
            follow = rng.random() < 0.5
            if rng.random() < 0.5:
                await write(stub, rng.choice(self.contended), follow)
                continue
            pair = rng.choice(self.serialized)
            async with self.locks[pair]:
                await write(stub, pair, follow)
                # Read your write through the cache while readers race to fill it.
                if await is_following(stub, pair) != follow:
                    self.stale.append(f"IsFollowing{pair} != {follow}")
                listed = [u for u, _ in (await list_page(stub, Direction.FOLLOWERS, pair[1]))[0]]
                if (pair[0] in listed) != follow:
                    self.stale.append(f"ListFollowers({pair[1]}) = {listed} after follow={follow} by {pair[0]}")
                listed = [u for u, _ in (await list_page(stub, Direction.FOLLOWING, pair[0]))[0]]
                if (pair[1] in listed) != follow:
                    self.stale.append(f"ListFollowing({pair[0]}) = {listed} after follow={follow} of {pair[1]}")


async def check_round(
    cached: Stub, truth: Stub, settings: Settings, users: Sequence[int], *, min_checked: int = 0
) -> dict[Pair, int]:
    """Right after writes stop, every cached answer and every Redis key agrees with DynamoDB; returns the edges."""
    edges = await truth_edges(truth, users)
    pairs = [(a, b) for a in users for b in users if a != b]
    assert {p: await is_following(cached, p) for p in pairs} == {p: p in edges for p in pairs}
    for direction in Direction:
        for user in users:
            assert await list_page(cached, direction, user) == await list_page(truth, direction, user)
            assert await list_page(cached, direction, user, 1) == await list_page(truth, direction, user, 1)
    assert await assert_cache_agrees(settings, edges, users, with_counts=False) >= min_checked
    return edges


async def cached_counts(settings: Settings, users: list[int]) -> dict[int, tuple[int, int] | None]:
    """The Redis count hashes as (followers, following), None where not cached (single-node Redis)."""
    client = aioredis.Redis.from_url(settings.redis_url)
    try:
        found: dict[int, tuple[int, int] | None] = {}
        for user in users:
            fl, fg = await client.hmget(keys.counts(user), ["fl", "fg"])
            found[user] = None if fl is None or fg is None else (int(fl), int(fg))
        return found
    finally:
        await client.aclose()


# -- relationships and the graph model they are checked against ---------------------------------

Flags = frozenset[str]
NONE: Flags = frozenset()


def flags_of(relationship: pb.Relationship) -> Flags:
    return frozenset(name for name in FLAGS if getattr(relationship, name))


async def relationships(stub: Stub, actor: int, targets: Sequence[int]) -> list[tuple[int, Flags]]:
    """GetRelationships as [(target_id, set flags)], in the order answered."""
    reply = await stub.GetRelationships(pb.GetRelationshipsRequest(actor_id=actor, target_ids=list(targets)))
    return [(r.target_id, flags_of(r)) for r in reply.relationships]


async def requests_of(stub: Stub, user: int, page_size: int = 0) -> list[int]:
    """Every pending request to ``user``, newest first (all pages)."""
    found: list[int] = []
    token = ""
    while True:
        reply = await stub.ListFollowRequests(
            pb.ListFollowRequestsRequest(user_id=user, page_size=page_size, page_token=token)
        )
        found.extend(r.user_id for r in reply.requests)
        token = reply.next_page_token
        if not token:
            return found


@dataclass
class Model:
    """What the graph must be: edges (follower, followee), requests (requester, asked), blocks (blocker,
    blocked), mutes in force (muter, muted) -> whether notifications are muted too."""

    edges: set[Pair] = field(default_factory=set)
    requests: set[Pair] = field(default_factory=set)
    blocks: set[Pair] = field(default_factory=set)
    mutes: dict[Pair, bool] = field(default_factory=dict)

    def relationship(self, actor: int, target: int) -> Flags:
        if actor == target:
            return NONE
        found = {
            "following": (actor, target) in self.edges,
            "followed_by": (target, actor) in self.edges,
            "requested": (actor, target) in self.requests,
            "requested_by": (target, actor) in self.requests,
            "blocking": (actor, target) in self.blocks,
            "blocked_by": (target, actor) in self.blocks,
            "muting": (actor, target) in self.mutes,
            "muting_notifications": self.mutes.get((actor, target), False),
        }
        return frozenset(name for name, on in found.items() if on)
