"""Post -> DynamoDB Streams -> relay -> Kafka -> fanout -> Redis -> GetHomeTimeline, all real."""

from __future__ import annotations

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
