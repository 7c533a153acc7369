"""Post -> DynamoDB Streams -> relay -> Kafka -> fanout -> Redis -> GetHomeTimeline, all real."""

from __future__ import annotations

import asyncio

from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc

from graph_service.entrypoints.server import ServerRuntime
from graph_service.settings import Settings
from tests.support.graph_calls import follow
from tests.support.polling import eventually
from tests.support.runtimes import running_fanout, running_relay
from tests.support.timeline_calls import post, timeline_becomes, timeline_stub_for, tweet_store


async def test_a_posted_tweet_reaches_every_followers_home_timeline(
    event_settings: Settings, server: ServerRuntime, stub: pb_grpc.SocialGraphServiceStub
) -> None:
    for follower in (1, 3):
        await follow(stub, follower, 2)
    async with (
        running_relay(event_settings),
        running_fanout(event_settings) as (worker, _),
        timeline_stub_for(server.port) as timelines,
        tweet_store(event_settings) as tweets,
    ):
        first = await post(tweets, 2, "hello")
        second = await post(tweets, 2, "again")
        for follower in (1, 3):
            await timeline_becomes(timelines, follower, [second, first])
        await timeline_becomes(timelines, 4, [])

        async def handled() -> int:  # counted after the timeline writes, so a moment after they show
            return worker.stats.handled["tweet"]

        assert await eventually(handled, lambda count: count >= 2, timeout=10) == 2


async def test_a_new_follow_brings_every_tweet_the_followee_posted_before_it_run_after_run(
    event_settings: Settings, server: ServerRuntime, stub: pb_grpc.SocialGraphServiceStub
) -> None:
    """The new-user case of SPEC §5's backfill: a fresh account posts three tweets with no
    followers, another follows it at once, and all three reach the follower whatever order the
    relay and fanout see the events in (the orders themselves are forced one by one in
    tests/unit/fanout/test_backfill_interleavings.py). Four pairs, started together, so that the
    tweet and follow events race through the two streams."""
    async with (
        running_relay(event_settings),
        running_fanout(event_settings),
        timeline_stub_for(server.port) as timelines,
        tweet_store(event_settings) as tweets,
    ):

        async def one_run(author: int, follower: int) -> None:
            posted = [await post(tweets, author, f"tweet {n}") for n in range(3)]
            await follow(stub, follower, author)
            await timeline_becomes(timelines, follower, posted[::-1])

        await asyncio.gather(*(one_run(author, author + 1) for author in (7100, 7200, 7300, 7400)))
