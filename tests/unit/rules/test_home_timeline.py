"""The home-timeline read path: merge pushed and pulled tweets, keep only followed authors, page,
on in-memory timelines, tweets and graph."""

from __future__ import annotations

from dataclasses import replace

import pytest

from graph_service.domain.errors import InvalidPageSize, InvalidPageToken, InvalidUserId, TimelineUnavailable
from graph_service.domain.models import Edge, Mute
from graph_service.entrypoints.rule_limits import rule_limits
from graph_service.rules.home_timeline import MIN_WINDOW, HomeTimeline
from graph_service.rules.page_tokens import PageTokenCodec
from graph_service.settings import Settings
from tests.support.fakes.accounts import FakeAccounts
from tests.support.fakes.graph import FakeGraph
from tests.support.fakes.timelines import FakeTimelines
from tests.support.fakes.tweets import FakeTweets

SETTINGS = Settings(page_token_secret="unit-test-secret", celebrity_refresh_seconds=0)
USER = 1


class World:
    def __init__(self, settings: Settings = SETTINGS) -> None:
        self.graph = FakeGraph()
        self.timelines = FakeTimelines()
        self.tweets = FakeTweets()
        self.accounts = FakeAccounts(self.graph)
        self.service = HomeTimeline(self.timelines, self.tweets, self.graph, rule_limits(settings), self.accounts)

    async def post(self, author: int, n: int = 1, *, pushed_to: tuple[int, ...] = (USER,)) -> list[int]:
        """``n`` tweets of ``author``, recorded and pushed as the fanout would; oldest first."""
        ids = []
        for i in range(n):
            tweet = await self.tweets.post(author, f"{author}-{i}")
            await self.timelines.record_tweet(author, tweet.tweet_id)
            await self.timelines.push(tweet.tweet_id, pushed_to)
            ids.append(tweet.tweet_id)
        return ids

    async def walk(self, user: int, size: int) -> list[list[int]]:
        pages: list[list[int]] = []
        token = ""
        while True:
            page = await self.service.home_timeline(user, size, token)
            pages.append(page.tweet_ids)
            if not page.next_page_token:
                return pages
            assert page.tweet_ids, "a page that is not the last is empty"
            token = page.next_page_token


@pytest.fixture
def world() -> World:
    return World()


async def test_tweets_of_followed_authors_newest_first(world: World) -> None:
    world.graph.edges[(USER, 2)] = 1
    world.graph.edges[(USER, 3)] = 1
    a, b = await world.post(2), await world.post(3)
    page = await world.service.home_timeline(USER, 0, "")
    assert (page.tweet_ids, page.next_page_token) == ([*b, *a], "")


async def test_an_author_no_longer_followed_is_hidden_at_once(world: World) -> None:
    world.graph.edges[(USER, 2)] = 1
    world.graph.edges[(USER, 3)] = 1
    kept, hidden = await world.post(2, 2), await world.post(3, 2)
    del world.graph.edges[(USER, 3)]  # an unfollow, a block, a RemoveFollower: the pushed entries stay
    assert (await world.service.home_timeline(USER, 0, "")).tweet_ids == kept[::-1]
    world.graph.edges[(USER, 3)] = 2  # and a re-follow shows them again
    assert sorted((await world.service.home_timeline(USER, 0, "")).tweet_ids) == sorted(kept + hidden)


async def test_followed_celebrities_are_pulled_and_merged_in_order(world: World) -> None:
    world.graph.edges[(USER, 2)] = 1
    world.graph.edges[(USER, 9)] = 1
    star = 9
    await world.timelines.mark_celebrity(star, 50_000)
    mixed = []
    for author in (2, star, 2, star):
        mixed += await world.post(author, pushed_to=() if author == star else (USER,))
    assert (await world.service.home_timeline(USER, 0, "")).tweet_ids == mixed[::-1]
    other = World()
    other.graph.edges[(USER, 2)] = 1
    await other.timelines.mark_celebrity(star, 50_000)
    await other.post(star, pushed_to=())
    assert (await other.service.home_timeline(USER, 0, "")).tweet_ids == []  # not followed: not pulled


async def test_authors_missing_from_the_cache_come_from_the_tweets_table_and_are_kept(world: World) -> None:
    world.graph.edges[(USER, 2)] = 1
    ids = await world.post(2, 3)
    world.timelines.tweet_authors.clear()  # expired from Redis
    await world.timelines.push(987_654, [USER])  # a pushed ID the tweets table does not know
    assert (await world.service.home_timeline(USER, 0, "")).tweet_ids == ids[::-1]
    assert world.tweets.lookups == 1
    assert all(world.timelines.tweet_authors[t] == 2 for t in ids)
    world.timelines.tweet_authors.clear()  # the service remembers the authors it found
    await world.service.home_timeline(USER, 0, "")
    assert world.tweets.lookups == 2  # only the unknown one is asked again
    assert not world.timelines.tweet_authors  # the known ones were not looked up in Redis either


async def test_paging_walks_without_repeats_gaps_or_empty_pages(world: World) -> None:
    world.graph.edges[(USER, 2)] = 1
    world.graph.edges[(USER, 3)] = 1
    kept = await world.post(2, 7)
    await world.post(3, 30)  # most of the timeline will be filtered out
    kept += await world.post(2, 4)
    del world.graph.edges[(USER, 3)]
    pages = await world.walk(USER, 3)
    assert [t for page in pages for t in page] == kept[::-1]
    assert [len(p) for p in pages] == [3, 3, 3, 2]


async def test_pages_read_the_timeline_a_window_at_a_time_and_merge_pulled_tweets_across_windows(
    world: World,
) -> None:
    """The first page of a full timeline reads one window of it, not all of it; a walk over many
    windows, most entries filtered out and a celebrity's pulled tweets between them, gives each
    readable tweet once, newest first."""
    star = 9
    world.graph.edges[(USER, 2)] = 1
    world.graph.edges[(USER, star)] = 1
    await world.timelines.mark_celebrity(star, 50_000)
    readable = []
    for i in range(600):
        author = (2, 3, 3, 3, star)[i % 5]
        posted = await world.post(author, pushed_to=() if author == star else (USER,))
        readable += posted if author != 3 else []
    first = await world.service.home_timeline(USER, 20, "")
    assert first.tweet_ids == readable[::-1][:20]
    assert world.timelines.home_entries_read <= 3 * MIN_WINDOW  # a window and one twice its size, of 480
    pages = await world.walk(USER, 7)
    assert [t for page in pages for t in page] == readable[::-1]
    assert all(len(p) == 7 for p in pages[:-1])


async def test_page_sizes_default_to_20_and_clamp_at_100(world: World) -> None:
    world.graph.edges[(USER, 2)] = 1
    await world.post(2, 120)
    assert len((await world.service.home_timeline(USER, 0, "")).tweet_ids) == 20
    assert len((await world.service.home_timeline(USER, 500, "")).tweet_ids) == 100
    with pytest.raises(InvalidPageSize):
        await world.service.home_timeline(USER, -1, "")


async def test_a_token_is_bound_to_its_user_and_to_timelines(world: World) -> None:
    world.graph.edges[(USER, 2)] = 1
    await world.post(2, 3)
    token = (await world.service.home_timeline(USER, 1, "")).next_page_token
    assert token
    with pytest.raises(InvalidPageToken):
        await world.service.home_timeline(2, 1, token)
    lists_token = PageTokenCodec(*SETTINGS.page_token_secrets).encode(f"home:{USER}", Edge(5, 1000))
    with pytest.raises(InvalidPageToken):
        await world.service.home_timeline(USER, 1, lists_token)  # a list cursor, not a timeline's


async def test_without_timelines_every_call_is_unavailable_after_validation() -> None:
    graph = FakeGraph()
    service = HomeTimeline(None, FakeTweets(), graph, rule_limits(SETTINGS), FakeAccounts(graph))
    assert not service.has_timelines
    with pytest.raises(InvalidUserId):
        await service.home_timeline(0, 0, "")
    with pytest.raises(TimelineUnavailable):
        await service.home_timeline(USER, 0, "")


async def test_the_celebrity_registry_is_read_once_per_refresh_interval() -> None:
    world = World(replace(SETTINGS, celebrity_refresh_seconds=3600))
    reads = 0
    celebrities = world.timelines.celebrities

    async def counted() -> list[int]:
        nonlocal reads
        reads += 1
        return await celebrities()

    world.timelines.celebrities = counted  # type: ignore[method-assign]  # the read, counted
    for _ in range(3):
        await world.service.home_timeline(USER, 0, "")
    assert reads == 1


async def test_a_muted_author_is_hidden_at_once_and_shown_again_on_unmute(world: World) -> None:
    """Pushed entries and a followed celebrity's pulled tweets alike; a mute that has ended hides nothing."""
    world.graph.edges[(USER, 2)] = 1
    world.graph.edges[(USER, 3)] = 1
    world.graph.edges[(USER, 4)] = 1
    kept, muted = await world.post(2, 2), await world.post(3, 2)
    await world.timelines.mark_celebrity(4, 50_000)
    pulled = await world.post(4, 2, pushed_to=())
    everything = sorted(kept + muted + pulled, reverse=True)
    assert (await world.service.home_timeline(USER, 0, "")).tweet_ids == everything
    await world.graph.put_mute(USER, Mute(3, 1, 0, False), replacing=None)
    await world.graph.put_mute(USER, Mute(4, 1, 0, True), replacing=None)
    assert (await world.service.home_timeline(USER, 0, "")).tweet_ids == kept[::-1]
    stored = await world.graph.mute_of(USER, 3)
    assert stored is not None
    await world.graph.remove_mute(USER, stored)
    assert (await world.service.home_timeline(USER, 0, "")).tweet_ids == sorted(kept + muted, reverse=True)
    ended = await world.graph.mute_of(USER, 4)
    assert ended is not None
    await world.graph.put_mute(USER, Mute(4, 1, 2, True), replacing=ended)  # ended at 2 µs after the epoch
    assert (await world.service.home_timeline(USER, 0, "")).tweet_ids == everything
