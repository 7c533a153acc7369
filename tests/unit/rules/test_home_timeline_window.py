"""The home-timeline read in one window read with the graph read beside it: pages as the rule says
(followed, not muted, in the graph) whatever the reader's last page left noted, the graph read
started while the window is read, a warm page making no other read, and a failed window read
still ``TIMELINE_UNAVAILABLE``; with the window's authors (a single Redis node) and without them
(a Redis Cluster)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence

import pytest

from graph_service.domain.accounts import AccountStatus, Lifecycle
from graph_service.domain.errors import TimelineUnavailable
from graph_service.domain.models import Mute, Relationship
from graph_service.domain.ports import TimelineWindow
from graph_service.entrypoints.rule_limits import rule_limits
from graph_service.rules.home_timeline import HomeTimeline, TimelinePage
from graph_service.settings import Settings
from tests.support.fakes.accounts import FakeAccounts
from tests.support.fakes.graph import FakeGraph
from tests.support.fakes.timelines import FakeTimelines
from tests.support.fakes.tweets import FakeTweets

SETTINGS = Settings(page_token_secret="unit-test-secret", celebrity_refresh_seconds=3600)
USER = 1
AUTHORS = range(2, 14)
STARS = (20, 21, 22)
GRAPH_DEADLINE = 5.0
"""How long the window read waits for the graph read to start beside it (it starts at once)."""


class World:
    def __init__(self, *, window_reads_authors: bool) -> None:
        self.graph = FakeGraph()
        self.timelines = FakeTimelines()
        self.timelines.window_reads_authors = window_reads_authors
        self.tweets = FakeTweets()
        self.accounts = FakeAccounts(self.graph)
        self.service = HomeTimeline(self.timelines, self.tweets, self.graph, rule_limits(SETTINGS), self.accounts)

    async def post(self, author: int, *, pushed: bool) -> int:
        tweet = await self.tweets.post(author, "t")
        await self.timelines.record_tweet(author, tweet.tweet_id)
        if pushed:
            await self.timelines.push(tweet.tweet_id, [USER])
        return tweet.tweet_id

    def set_state(self, user: int, state: Lifecycle) -> None:
        self.accounts.stored[user] = AccountStatus(user, state)

    async def expected(self) -> list[int]:
        """The rule, read off the world directly: every pushed entry and every followed celebrity's
        recent tweet whose author (in the tweets table) the user follows, does not mute, and is in
        the graph; newest first."""
        stars = [s for s in STARS if s in self.timelines.celebrity_scores and (USER, s) in self.graph.edges]
        candidates = {*self.timelines.homes.get(USER, []), *(t for s in stars for t in self.timelines.recents[s])}
        shown = []
        for tweet_id in candidates:
            tweet = self.tweets.tweets.get(tweet_id)
            if tweet is None or tweet.author_id == USER:
                continue
            author = tweet.author_id
            muted = (USER, author) in self.graph.mutes
            in_graph = (await self.accounts.status(author)).state.in_graph
            if (USER, author) in self.graph.edges and not muted and in_graph:
                shown.append(tweet_id)
        return sorted(shown, reverse=True)

    async def walk(self, size: int) -> list[int]:
        seen: list[int] = []
        token = ""
        while True:
            page = await self.service.home_timeline(USER, size, token)
            seen += page.tweet_ids
            if not page.next_page_token:
                return seen
            assert page.tweet_ids, "a page that is not the last is empty"
            token = page.next_page_token


async def seed(world: World, rng: random.Random) -> None:
    for author in (*AUTHORS, *STARS):
        if rng.random() < 0.8:
            world.graph.edges[(USER, author)] = 1
    for star in STARS:
        await world.timelines.mark_celebrity(star, 50_000)
    for _ in range(300):
        author = rng.choice([*AUTHORS, *STARS, USER])
        await world.post(author, pushed=author not in STARS)
    for _ in range(5):  # pushed IDs the tweets table does not know
        await world.timelines.push(rng.randrange(1, 2**62), [USER])


async def change(world: World, rng: random.Random) -> None:
    """One of the changes that must show on the very next page."""
    author = rng.choice([*AUTHORS, *STARS])
    pair = (USER, author)
    match rng.randrange(6):
        case 0:
            if pair in world.graph.edges:
                del world.graph.edges[pair]  # an unfollow: its pushed entries stay
            else:
                world.graph.edges[pair] = 1  # a follow: a celebrity's recent tweets show at once
        case 1:
            world.graph.mutes[pair] = Mute(author, 1, 0, False)
        case 2:
            world.graph.mutes.pop(pair, None)
        case 3:
            world.set_state(author, rng.choice([Lifecycle.DEACTIVATED, Lifecycle.DELETING, Lifecycle.ACTIVE]))
        case 4:
            world.timelines.tweet_authors.clear()  # the authors' keys expired
        case _:
            await world.post(author, pushed=author not in STARS)


@pytest.mark.parametrize("window_reads_authors", [True, False], ids=["single-node", "cluster"])
@pytest.mark.parametrize("seed_value", [1, 2, 3])
async def test_pages_follow_the_rule_through_changes_whatever_the_last_page_noted(
    window_reads_authors: bool, seed_value: int
) -> None:
    """Each first page and walk after a change (a follow or unfollow, a mute or unmute, an author
    out of the graph or back, authors expired from Redis, a new tweet) is what the rule gives,
    although the reader's notes from the page before (its authors, its celebrities) are stale."""
    rng = random.Random(seed_value)
    world = World(window_reads_authors=window_reads_authors)
    await seed(world, rng)
    for step in range(40):
        expected = await world.expected()
        size = rng.choice([1, 5, 20, 40])
        page = await world.service.home_timeline(USER, size, "")
        assert page.tweet_ids == expected[:size], f"step {step}"
        assert bool(page.next_page_token) == (len(expected) > size)
        if step % 8 == 0:
            assert await world.walk(rng.choice([7, 30])) == expected
        await change(world, rng)


async def test_a_reader_out_of_the_graph_reads_an_empty_timeline() -> None:
    world = World(window_reads_authors=True)
    world.graph.edges[(USER, 2)] = 1
    await world.post(2, pushed=True)
    assert (await world.service.home_timeline(USER, 0, "")).tweet_ids
    world.set_state(USER, Lifecycle.DEACTIVATED)
    assert await world.service.home_timeline(USER, 0, "") == TimelinePage([], "")


class Counted:
    """The world's reads, counted by name; the window read waits until the graph read has begun."""

    def __init__(self, world: World) -> None:
        self.calls: list[str] = []
        self.graph_started = asyncio.Event()
        self.inside_window = False
        timelines, graph, accounts = world.timelines, world.graph, world.accounts
        window, relationships, states = timelines.window, graph.relationships, accounts.states

        async def counted_window(
            user_id: int, limit: int, *, older_than: int | None, pulled: Sequence[int]
        ) -> TimelineWindow:
            self.calls.append("window")
            await asyncio.wait_for(self.graph_started.wait(), GRAPH_DEADLINE)
            self.inside_window = True  # the fake's window is made of its other reads: not counted
            try:
                return await window(user_id, limit, older_than=older_than, pulled=pulled)
            finally:
                self.inside_window = False

        async def counted_relationships(actor_id: int, target_ids: Sequence[int]) -> dict[int, Relationship]:
            self.calls.append("relationships")
            self.graph_started.set()
            return await relationships(actor_id, target_ids)

        async def counted_states(user_ids: Sequence[int]) -> dict[int, Lifecycle]:
            self.calls.append("states")
            return await states(user_ids)

        def count(name: str, method: object) -> object:
            async def counted(*args: object, **kwargs: object) -> object:
                if not self.inside_window:
                    self.calls.append(name)
                return await method(*args, **kwargs)  # type: ignore[operator]  # the fake's own method

            return counted

        timelines.window = counted_window  # type: ignore[method-assign]  # the read, counted
        graph.relationships = counted_relationships  # type: ignore[method-assign]
        accounts.states = counted_states  # type: ignore[method-assign]
        for name in ("home", "recent_of_many", "authors", "fill_authors", "celebrities"):
            setattr(timelines, name, count(name, getattr(timelines, name)))
        world.tweets.authors = count("tweets", world.tweets.authors)  # type: ignore[method-assign,assignment]


async def test_a_warm_page_is_one_window_read_beside_one_graph_read() -> None:
    """After a first page, the next is one window read (with the followed celebrity's tweets and
    the authors) and one states and relationships read, begun while the window is read."""
    world = World(window_reads_authors=True)
    for author in (2, 3, STARS[0]):
        world.graph.edges[(USER, author)] = 1
    await world.timelines.mark_celebrity(STARS[0], 50_000)
    for i in range(40):
        await world.post((2, 3, 4, STARS[0])[i % 4], pushed=i % 4 != 3)
    counted = Counted(world)
    first = await world.service.home_timeline(USER, 20, "")
    assert "recent_of_many" in counted.calls  # the celebrity was not noted yet: read after the window
    assert "authors" not in counted.calls  # the window brought the authors
    assert "tweets" not in counted.calls
    counted.calls.clear()
    again = await world.service.home_timeline(USER, 20, "")
    assert again == first
    assert sorted(counted.calls) == ["relationships", "states", "window"]
    assert first.tweet_ids == (await world.expected())[:20]


async def test_an_author_new_to_the_page_is_asked_about_after_the_window() -> None:
    world = World(window_reads_authors=True)
    world.graph.edges[(USER, 2)] = 1
    world.graph.edges[(USER, 3)] = 1
    await world.post(2, pushed=True)
    await world.service.home_timeline(USER, 0, "")
    newer = await world.post(3, pushed=True)
    counted = Counted(world)
    assert (await world.service.home_timeline(USER, 0, "")).tweet_ids[0] == newer
    assert counted.calls.count("relationships") == 2


async def test_a_failed_window_read_is_unavailable_even_for_a_reader_out_of_the_graph() -> None:
    """The graph read begun beside it is cancelled and awaited: nothing is left running."""
    world = World(window_reads_authors=True)
    world.set_state(USER, Lifecycle.DEACTIVATED)
    graph_reads: list[asyncio.Task[object] | None] = []
    relationships = world.graph.relationships

    async def slow_relationships(actor_id: int, target_ids: Sequence[int]) -> dict[int, Relationship]:
        graph_reads.append(asyncio.current_task())
        await asyncio.Event().wait()  # never answers: the failed window read must cancel it
        return await relationships(actor_id, target_ids)

    async def failing_window(
        user_id: int, limit: int, *, older_than: int | None, pulled: Sequence[int]
    ) -> TimelineWindow:
        await asyncio.sleep(0)  # the graph read begins meanwhile
        raise TimelineUnavailable("Redis did not answer")

    world.graph.relationships = slow_relationships  # type: ignore[method-assign]
    world.timelines.window = failing_window  # type: ignore[method-assign]
    with pytest.raises(TimelineUnavailable):
        await world.service.home_timeline(USER, 0, "")
    assert graph_reads
    assert all(task is not None and task.cancelled() for task in graph_reads)


async def test_the_next_page_token_is_the_same_for_the_same_page() -> None:
    world = World(window_reads_authors=True)
    world.graph.edges[(USER, 2)] = 1
    for _ in range(5):
        await world.post(2, pushed=True)
    first = await world.service.home_timeline(USER, 2, "")
    assert first == await world.service.home_timeline(USER, 2, "")
    other = await world.service.home_timeline(USER, 3, "")
    assert other.next_page_token != first.next_page_token
    assert (await world.service.home_timeline(USER, 2, first.next_page_token)).tweet_ids == (await world.walk(2))[2:4]
