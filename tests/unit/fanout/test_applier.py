"""What one event does to the timelines, on an in-memory follower source and timelines."""

from __future__ import annotations

from fanout.applier import Fanout, FanoutConfig
from graph_service.domain.models import Counts, Cursor, EdgePage
from graph_service.events.kinds import Follow, TweetPosted
from tests.support.fakes.accounts import ALL_ACTIVE
from tests.support.fakes.graph import FakeGraph
from tests.support.fakes.timelines import FakeTimelines

CONFIG = FanoutConfig(batch_size=3, celebrity_threshold=10)
AUTHOR = 1


def graph_with_followers(n: int, *, counted: int | None = None) -> FakeGraph:
    graph = FakeGraph()
    for follower in range(100, 100 + n):
        graph.edges[(follower, AUTHOR)] = follower
    graph.set_counts(AUTHOR, Counts(followers=n if counted is None else counted))
    return graph


def posted(tweet_id: int) -> TweetPosted:
    return TweetPosted(tweet_id, AUTHOR, 0)


async def test_a_tweet_reaches_every_follower_page_by_page() -> None:
    graph, timelines = graph_with_followers(7), FakeTimelines()
    pages: list[int] = []
    list_followers = graph.list_followers

    async def counted(user_id: int, limit: int, after: Cursor | None) -> EdgePage:
        page = await list_followers(user_id, limit, after)
        pages.append(len(page.entries))
        return page

    graph.list_followers = counted  # type: ignore[method-assign]  # the read, counted
    assert await Fanout(graph, timelines, CONFIG, states=ALL_ACTIVE).tweet(posted(5000)) == 7
    assert pages == [3, 3, 1]  # the fanout batch size
    assert all(timelines.homes[f] == [5000] for f in range(100, 107))
    assert timelines.recents[AUTHOR] == [5000]
    assert timelines.tweet_authors[5000] == AUTHOR
    assert AUTHOR not in timelines.homes  # the author's own timeline is not written


async def test_a_redelivered_tweet_changes_nothing() -> None:
    graph, timelines = graph_with_followers(4), FakeTimelines()
    fanout = Fanout(graph, timelines, CONFIG, states=ALL_ACTIVE)
    await fanout.tweet(posted(5000))
    await fanout.tweet(posted(6000))
    before = {u: list(t) for u, t in timelines.homes.items()}
    await fanout.tweet(posted(5000))
    assert timelines.homes == before
    assert timelines.homes[100] == [6000, 5000]


async def test_a_celebrity_s_tweet_is_not_pushed_but_recorded_for_readers() -> None:
    graph, timelines = graph_with_followers(12), FakeTimelines()
    assert await Fanout(graph, timelines, CONFIG, states=ALL_ACTIVE).tweet(posted(5000)) == 0
    assert not timelines.homes
    assert timelines.celebrity_scores == {AUTHOR: 12}
    assert timelines.recents[AUTHOR] == [5000]


async def test_a_lagging_count_stops_the_push_at_the_threshold_and_marks_a_celebrity() -> None:
    graph, timelines = graph_with_followers(25, counted=2), FakeTimelines()
    assert await Fanout(graph, timelines, CONFIG, states=ALL_ACTIVE).tweet(posted(5000)) == 10
    assert len(timelines.homes) == 10
    assert timelines.celebrity_scores == {AUTHOR: 10}


async def test_a_new_follow_brings_the_followee_s_recent_tweets_and_an_unfollow_takes_them_away() -> None:
    graph, timelines = graph_with_followers(0), FakeTimelines()
    fanout = Fanout(graph, timelines, CONFIG, states=ALL_ACTIVE)
    for tweet_id in (10, 30, 20):
        await timelines.record_tweet(AUTHOR, tweet_id)
    await timelines.merge(7, [25, 5])
    await fanout.follow(Follow(7, AUTHOR, True, 0))
    assert timelines.homes[7] == [30, 25, 20, 10, 5]
    await fanout.follow(Follow(7, AUTHOR, True, 0))  # redelivered: nothing new
    assert timelines.homes[7] == [30, 25, 20, 10, 5]
    await fanout.follow(Follow(7, AUTHOR, False, 0))
    assert timelines.homes[7] == [25, 5]


async def test_following_a_celebrity_backfills_nothing() -> None:
    graph, timelines = graph_with_followers(0), FakeTimelines()
    await timelines.record_tweet(AUTHOR, 10)
    await timelines.mark_celebrity(AUTHOR, 50_000)
    await Fanout(graph, timelines, CONFIG, states=ALL_ACTIVE).follow(Follow(7, AUTHOR, True, 0))
    assert timelines.homes.get(7, []) == []  # its tweets are pulled at read time


async def test_apply_does_what_the_kind_s_own_step_does() -> None:
    graph, timelines = graph_with_followers(3), FakeTimelines()
    fanout = Fanout(graph, timelines, CONFIG, states=ALL_ACTIVE)
    for tweet_id in (10, 30):
        await timelines.record_tweet(AUTHOR, tweet_id)
    assert await fanout.apply(posted(5000)) == 3  # pushed to every follower, like ``tweet``
    assert await fanout.apply(Follow(7, AUTHOR, True, 0)) == 0  # no push, a backfill, like ``follow``
    assert timelines.homes[7] == [5000, 30, 10]
