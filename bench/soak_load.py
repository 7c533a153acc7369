"""The soak's load: a fixed graph, a mix of calls made by paced (or, to measure capacity, unpaced)
callers, and a record of every outcome.

The graph keeps the checks exact: each user follows ``STABLE`` accounts before the load starts and
never unfollows them (their tweets must reach the user's home timeline), and the load toggles
``TOGGLED`` other accounts per user. Each toggled pair belongs to one caller at a time, so after
that caller's acknowledged Follow or Unfollow its next IsFollowing of the pair must agree (a read
older than the caller's own acknowledged write is a stale read). A user's timeline only ever
receives the tweets of its ``STABLE + TOGGLED`` accounts, which keeps it far below the timeline cap
and every follower count far below the celebrity threshold.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

import grpc
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc
from socialgraph.v1 import timeline_pb2 as tl
from socialgraph.v1 import timeline_pb2_grpc as tl_grpc

from graph_service.domain.errors import DomainError
from graph_service.tweets.tweet_store import DynamoTweetStore

__all__ = ["MIX", "Graph", "Pair", "Record", "Tweet", "drive", "follow_stable", "plan_graph"]

T = TypeVar("T")

FIRST_USER = 1_000_001
STABLE = 5
TOGGLED = 3
CALL_TIMEOUT = 10.0
"""Seconds a call may take before the soak gives up on it (DEADLINE_EXCEEDED)."""

MIX = {
    "Follow/Unfollow": 15,
    "IsFollowing": 20,
    "ListFollowers": 8,
    "ListFollowing": 7,
    "GetCounts": 20,
    "PostTweet": 5,
    "GetHomeTimeline": 25,
}
"""Share of each kind of call, in percent. PostTweet is ``socialgraph post``'s code path
(``DynamoTweetStore.post``, a conditional PutItem whose stream the relay reads)."""


@dataclass
class Pair:
    follower: int
    followee: int
    following: bool | None = False
    """What the last acknowledged write left; None after a write whose outcome is unknown (it failed)."""


@dataclass(frozen=True)
class Graph:
    users: list[int]
    stable: dict[int, tuple[int, ...]]
    """follower -> the accounts it follows for the whole run."""
    toggled: list[Pair]
    """The pairs the load follows and unfollows."""
    toggled_of: dict[int, tuple[int, ...]]
    """follower -> the accounts of its toggled pairs."""

    def sources(self, user: int) -> set[int]:
        """Every account whose tweets may reach ``user``'s home timeline (followed at some time)."""
        return {*self.stable[user], *self.toggled_of[user]}


def plan_graph(users: int, rng: random.Random) -> Graph:
    ids = list(range(FIRST_USER, FIRST_USER + users))
    stable: dict[int, tuple[int, ...]] = {}
    toggled_of: dict[int, tuple[int, ...]] = {}
    for user in ids:
        others = [u for u in rng.sample(ids, STABLE + TOGGLED + 1) if u != user][: STABLE + TOGGLED]
        stable[user], toggled_of[user] = tuple(others[:STABLE]), tuple(others[STABLE:])
    toggled = [Pair(user, other) for user, others in toggled_of.items() for other in others]
    rng.shuffle(toggled)
    return Graph(ids, stable, toggled, toggled_of)


@dataclass(frozen=True)
class Tweet:
    tweet_id: int
    author_id: int
    posted_at: float
    """``time.monotonic()`` when the post began."""


@dataclass(frozen=True)
class Failure:
    rpc: str
    code: str
    started: float
    ended: float
    detail: str


@dataclass(frozen=True)
class StaleRead:
    follower: int
    followee: int
    expected: bool
    answered: bool
    at: float


@dataclass
class Record:
    """Every outcome of one phase; times are ``time.monotonic()``."""

    calls: Counter[str] = field(default_factory=Counter)
    latencies: dict[str, list[float]] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    tweets: list[Tweet] = field(default_factory=list)
    stale: list[StaleRead] = field(default_factory=list)
    per_second: Counter[int] = field(default_factory=Counter)
    """Calls finished, by whole second since ``started``."""
    started: float = field(default_factory=time.monotonic)
    """Made just before the phase starts: its origin."""
    ended: float = 0.0

    async def timed(self, rpc: str, call: Callable[[], Awaitable[T]]) -> T | None:
        """``call``'s answer, or None when it failed (the failure is recorded with its gRPC code)."""
        started = time.monotonic()
        try:
            answer = await call()
        except grpc.aio.AioRpcError as exc:
            self._failed(rpc, exc.code().name, started, exc.details() or "")
            return None
        except DomainError as exc:  # the post path, in this process
            self._failed(rpc, exc.code.name, started, exc.message)
            return None
        except TimeoutError:
            self._failed(rpc, "DEADLINE_EXCEEDED", started, f"no answer within {CALL_TIMEOUT:.0f} s")
            return None
        except Exception as exc:  # anything else the post path raises: reported, the soak goes on
            self._failed(rpc, type(exc).__name__, started, str(exc))
            return None
        ended = time.monotonic()
        self.calls[rpc] += 1
        self.latencies.setdefault(rpc, []).append(ended - started)
        self.per_second[int(ended - self.started)] += 1
        return answer

    def _failed(self, rpc: str, code: str, started: float, detail: str) -> None:
        ended = time.monotonic()
        self.calls[rpc] += 1
        self.failures.append(Failure(rpc, code, started, ended, detail[:200]))
        self.per_second[int(ended - self.started)] += 1


class Caller:
    """One client of the mix; writes only the toggled pairs it was given."""

    def __init__(self, channel: grpc.aio.Channel, tweets: DynamoTweetStore, graph: Graph, record: Record) -> None:
        self._graph = pb_grpc.SocialGraphServiceStub(channel)
        self._timelines = tl_grpc.TimelineServiceStub(channel)
        self._tweets = tweets
        self._users = graph.users
        self._record = record

    async def one(self, kind: str, rng: random.Random, own: list[Pair]) -> None:
        user = rng.choice(self._users)
        record, stub, t = self._record, self._graph, CALL_TIMEOUT
        if kind == "Follow/Unfollow":
            await self._toggle(rng.choice(own), rng)
        elif kind == "IsFollowing":
            await self._is_following(rng.choice(own))
        elif kind == "ListFollowers":
            await record.timed(kind, lambda: stub.ListFollowers(pb.ListFollowersRequest(user_id=user), timeout=t))
        elif kind == "ListFollowing":
            await record.timed(kind, lambda: stub.ListFollowing(pb.ListFollowingRequest(user_id=user), timeout=t))
        elif kind == "GetCounts":
            await record.timed(kind, lambda: stub.GetCounts(pb.GetCountsRequest(user_id=user), timeout=t))
        elif kind == "GetHomeTimeline":
            request = tl.GetHomeTimelineRequest(user_id=user)
            await record.timed(kind, lambda: self._timelines.GetHomeTimeline(request, timeout=t))
        else:
            started = time.monotonic()
            tweet = await record.timed(kind, lambda: asyncio.wait_for(self._tweets.post(user, "soak"), t))
            if tweet is not None:
                record.tweets.append(Tweet(tweet.tweet_id, user, started))

    async def _toggle(self, pair: Pair, rng: random.Random) -> None:
        follow = not pair.following if pair.following is not None else rng.random() < 0.5
        ids = {"follower_id": pair.follower, "followee_id": pair.followee}
        if follow:
            answer: object = await self._record.timed(
                "Follow", lambda: self._graph.Follow(pb.FollowRequest(**ids), timeout=CALL_TIMEOUT)
            )
        else:
            answer = await self._record.timed(
                "Unfollow", lambda: self._graph.Unfollow(pb.UnfollowRequest(**ids), timeout=CALL_TIMEOUT)
            )
        pair.following = follow if answer is not None else None

    async def _is_following(self, pair: Pair) -> None:
        request = pb.IsFollowingRequest(follower_id=pair.follower, followee_id=pair.followee)
        answer = await self._record.timed("IsFollowing", lambda: self._graph.IsFollowing(request, timeout=CALL_TIMEOUT))
        if answer is not None and pair.following is not None and answer.following != pair.following:
            self._record.stale.append(
                StaleRead(pair.follower, pair.followee, pair.following, answer.following, time.monotonic())
            )


async def drive(
    channel: grpc.aio.Channel,
    tweets: DynamoTweetStore,
    graph: Graph,
    record: Record,
    *,
    callers: int,
    seconds: float,
    rate: float | None,
    seed: int,
) -> None:
    """``callers`` clients for ``seconds``: back to back (``rate`` None, a closed loop) or each paced
    to ``rate / callers`` calls a second; a caller that falls behind (a slow call) does not catch up
    in a burst afterwards."""
    kinds, weights = list(MIX), list(MIX.values())
    stop_at = time.monotonic() + seconds

    async def run(index: int) -> None:
        rng = random.Random(seed * 7919 + index)
        caller = Caller(channel, tweets, graph, record)
        own = graph.toggled[index::callers]
        interval = callers / rate if rate else 0.0
        next_at = time.monotonic() + rng.uniform(0, interval)
        while True:
            now = time.monotonic()
            if interval:
                await asyncio.sleep(max(0.0, next_at - now))
                next_at = max(next_at + interval, time.monotonic())
            if time.monotonic() >= stop_at:
                return
            await caller.one(rng.choices(kinds, weights)[0], rng, own)

    await asyncio.gather(*(run(i) for i in range(callers)))
    record.ended = time.monotonic()


async def follow_stable(channel: grpc.aio.Channel, graph: Graph, *, concurrency: int = 32) -> None:
    """Every pair of ``graph.stable``, acknowledged (a failure is tried again, five times at most)."""
    stub = pb_grpc.SocialGraphServiceStub(channel)
    pairs = [(follower, followee) for follower, followees in graph.stable.items() for followee in followees]
    queue: asyncio.Queue[tuple[int, int]] = asyncio.Queue()
    for pair in pairs:
        queue.put_nowait(pair)

    async def work() -> None:
        while not queue.empty():
            follower, followee = queue.get_nowait()
            request = pb.FollowRequest(follower_id=follower, followee_id=followee)
            for attempt in range(5):
                try:
                    await stub.Follow(request, timeout=CALL_TIMEOUT)
                    break
                except grpc.aio.AioRpcError:
                    if attempt == 4:
                        raise
                    await asyncio.sleep(0.5)

    await asyncio.gather(*(work() for _ in range(concurrency)))
