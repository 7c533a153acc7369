"""A tweet posted before a follow reaches the follower's timeline in every order of the steps
that decide it (SPEC §5, backfill), forced one by one rather than hoped for:

- ``record``: the tweet's event recorded among the author's recent tweets (``Fanout.tweet``);
- ``read``: the same event reading the author's followers (count and list) and pushing;
- ``commit``: the follow committed in the store (its event exists only after this);
- ``settle``: the follow visible in the follower list the fanout reads (the cache's write-through
  after the commit; until then that list still lacks the follower);
- ``note``: the follow's event noted and the recent tweets read (``Fanout.follow``).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator

import pytest

from fanout.applier import Fanout, FanoutConfig
from graph_service.domain.models import Cursor, Edge, EdgePage
from graph_service.events.kinds import Follow, TweetPosted
from tests.support.fakes.accounts import ALL_ACTIVE
from tests.support.fakes.timelines import FakeTimelines

CONFIG = FanoutConfig(batch_size=2, celebrity_threshold=100)
AUTHOR, FOLLOWER, OLD_FOLLOWER = 1, 7, 8
STEPS = ("record", "read", "commit", "settle", "note")
GATED = ("record", "read", "note")


class Gates:
    """One gate per gated step: the step waits for its gate, then reports it has run."""

    def __init__(self) -> None:
        self.open = {name: asyncio.Event() for name in GATED}
        self.ran = {name: asyncio.Event() for name in GATED}

    async def run(self, name: str) -> None:
        self.open[name].set()
        await asyncio.wait_for(self.ran[name].wait(), timeout=5)


class LaggingFollowers:
    """The fanout's follower source: a list that shows a follow only once it has settled."""

    def __init__(self, gates: Gates) -> None:
        self.gates = gates
        self.visible = {OLD_FOLLOWER}

    async def follower_count(self, user_id: int) -> int:
        await self.gates.open["read"].wait()
        return len(self.visible)

    async def list_followers(self, user_id: int, limit: int, after: Cursor | None) -> EdgePage:
        ids = sorted(self.visible)
        start = 0 if after is None else ids.index(after.user_id) + 1
        page = [Edge(user_id=u, at_us=u) for u in ids[start : start + limit]]
        if start + limit >= len(ids):
            self.gates.ran["read"].set()
        return EdgePage(entries=page, has_more=start + limit < len(ids))


class GatedTimelines(FakeTimelines):
    def __init__(self, gates: Gates) -> None:
        super().__init__()
        self.gates = gates

    async def record_tweet(self, author_id: int, tweet_id: int) -> list[int]:
        await self.gates.open["record"].wait()
        try:
            return await super().record_tweet(author_id, tweet_id)
        finally:
            self.gates.ran["record"].set()

    async def note_follow(self, followee_id: int, follower_id: int, *, followed: bool) -> list[int]:
        await self.gates.open["note"].wait()
        try:
            return await super().note_follow(followee_id, follower_id, followed=followed)
        finally:
            self.gates.ran["note"].set()


def orders() -> Iterator[tuple[str, ...]]:
    """Every order of the five steps that can happen: a tweet's event is recorded before it reads
    the followers; the follow's event exists only once the follow has committed, and the list the
    fanout reads can show it only after that too."""
    for order in itertools.permutations(STEPS):
        at = {step: i for i, step in enumerate(order)}
        if at["record"] < at["read"] and at["commit"] < at["note"] and at["commit"] < at["settle"]:
            yield order


async def run_in_order(order: tuple[str, ...], tweet_id: int = 5000) -> list[int]:
    gates = Gates()
    followers, timelines = LaggingFollowers(gates), GatedTimelines(gates)
    fanout = Fanout(followers, timelines, CONFIG, states=ALL_ACTIVE)
    tasks = [
        asyncio.create_task(fanout.tweet(TweetPosted(tweet_id, AUTHOR, 0))),
        asyncio.create_task(fanout.follow(Follow(FOLLOWER, AUTHOR, True, 0))),
    ]
    committed = False
    for step in order:
        if step == "commit":
            committed = True
        elif step == "settle":
            assert committed
            followers.visible.add(FOLLOWER)
        else:
            await gates.run(step)
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=5)
    assert timelines.homes.get(OLD_FOLLOWER) == [tweet_id]
    return timelines.homes.get(FOLLOWER, [])


ORDERS = list(orders())


def test_every_possible_order_is_tried() -> None:
    assert len(ORDERS) == 20
    assert ("commit", "note", "record", "read", "settle") in ORDERS  # the order that lost tweets


@pytest.mark.parametrize("order", ORDERS, ids=["-".join(o) for o in ORDERS])
async def test_a_tweet_posted_before_a_follow_reaches_the_follower_in_any_order(order: tuple[str, ...]) -> None:
    assert await run_in_order(order) == [5000]


async def test_three_tweets_before_between_and_after_the_follow_s_event_all_arrive() -> None:
    """The issue's case: three tweets, the follower list lagging the follow throughout."""
    gates = Gates()
    followers, timelines = LaggingFollowers(gates), FakeTimelines()
    for name in GATED:
        gates.open[name].set()
    fanout = Fanout(followers, timelines, CONFIG, states=ALL_ACTIVE)
    await fanout.tweet(TweetPosted(5001, AUTHOR, 0))  # before the follow committed
    await fanout.follow(Follow(FOLLOWER, AUTHOR, True, 0))
    await fanout.tweet(TweetPosted(5002, AUTHOR, 0))  # after its event, the list not settled yet
    followers.visible.add(FOLLOWER)
    await fanout.tweet(TweetPosted(5003, AUTHOR, 0))  # after it settled
    assert timelines.homes[FOLLOWER] == [5003, 5002, 5001]


async def test_after_an_unfollow_s_event_a_new_tweet_is_not_pushed_and_the_old_ones_are_taken_out() -> None:
    gates = Gates()
    followers, timelines = LaggingFollowers(gates), FakeTimelines()
    for name in GATED:
        gates.open[name].set()
    fanout = Fanout(followers, timelines, CONFIG, states=ALL_ACTIVE)
    await fanout.tweet(TweetPosted(5001, AUTHOR, 0))
    await fanout.follow(Follow(FOLLOWER, AUTHOR, True, 0))
    await fanout.follow(Follow(FOLLOWER, AUTHOR, False, 0))  # the list never showed the follow
    await fanout.tweet(TweetPosted(5002, AUTHOR, 0))
    assert timelines.homes[FOLLOWER] == []
    assert timelines.homes[OLD_FOLLOWER] == [5002, 5001]


async def test_a_celebrity_s_new_followers_get_no_push() -> None:
    """A celebrity's tweets are pulled by readers; the backfill handshake pushes none of them."""
    gates = Gates()
    followers, timelines = LaggingFollowers(gates), FakeTimelines()
    for name in GATED:
        gates.open[name].set()
    followers.visible |= set(range(1000, 1000 + CONFIG.celebrity_threshold))
    fanout = Fanout(followers, timelines, CONFIG, states=ALL_ACTIVE)
    await fanout.follow(Follow(FOLLOWER, AUTHOR, True, 0))
    assert await fanout.tweet(TweetPosted(5001, AUTHOR, 0)) == 0
    assert FOLLOWER not in timelines.homes or timelines.homes[FOLLOWER] == []
    assert timelines.celebrity_scores == {AUTHOR: CONFIG.celebrity_threshold + 1}
