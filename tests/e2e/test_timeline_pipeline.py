"""Post -> DynamoDB Streams -> relay -> Kafka -> fanout -> Redis -> GetHomeTimeline, all real."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc

from graph_service.entrypoints.server import ServerRuntime
from graph_service.settings import Settings
from tests.support.children import child_process, kafka_environment
from tests.support.graph_calls import follow
from tests.support.otlp_receiver import otlp_receiver
from tests.support.polling import eventually
from tests.support.runtimes import running_fanout, running_relay
from tests.support.span_tree import ancestors, from_received, render, the_span
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


async def test_a_posted_tweet_is_one_trace_from_the_relays_stream_read_to_the_followers_timeline(
    event_settings: Settings, server: ServerRuntime, stub: pb_grpc.SocialGraphServiceStub, tmp_path: Path
) -> None:
    """The relay and the fanout as processes, tracing to an OTLP receiver: the tweet's stream batch,
    its send, the fanout's processing and its Redis writes are one trace, parent under parent. The
    processes export only when stopped (a batch delay of a minute): SIGTERM sends what they hold."""
    await follow(stub, 1, 2)
    with otlp_receiver() as receiver:
        tracing = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "60000"}
        environment = {**kafka_environment(event_settings), **tracing}
        async with contextlib.AsyncExitStack() as stack:
            async with asyncio.TaskGroup() as starting:  # side by side: a start takes seconds
                children = [
                    starting.create_task(
                        stack.enter_async_context(child_process(event_settings, name, tmp_path, **environment))
                    )
                    for name in ("relay", "fanout")
                ]
            timelines = await stack.enter_async_context(timeline_stub_for(server.port))
            tweets = await stack.enter_async_context(tweet_store(event_settings))
            tweet = await post(tweets, 2, "traced")
            await timeline_becomes(timelines, 1, [tweet])
            stopped = await asyncio.gather(*(child.result().stop() for child in children))
            assert stopped == [0, 0], "".join(child.result().log() for child in children)
        received = from_received(receiver.spans())
    topic = event_settings.tweets_topic
    processed = the_span(
        received,
        lambda s: s.name == f"process {topic}" and s.attributes.get("messaging.kafka.message.key") == str(tweet),
        "the fanout's processing of the tweet",
    )
    spans = [s for s in received if s.trace_id == processed.trace_id]
    tree = render(spans)
    print(f"the trace of tweet {tweet}:\n{tree}")
    sent = the_span(spans, lambda s: s.name == f"send {topic}", "the relay's send")
    batch = the_span(spans, lambda s: s.name == f"process {event_settings.table('tweets')} stream", "the stream batch")
    assert (batch.service, sent.service, processed.service) == (
        "socialgraph-relay",
        "socialgraph-relay",
        "socialgraph-fanout",
    ), tree
    assert (batch.parent_id, ancestors(spans, processed)[:2]) == (None, [sent, batch]), tree
    writes = [s for s in spans if s.attributes.get("db.system") == "redis"]
    assert writes, tree
    assert all(processed in ancestors(spans, write) for write in writes), tree
    last = max(writes, key=lambda s: s.start_ns)  # the push to the follower's home timeline, the last write
    assert (last.name, last.attributes.get("db.operation.batch.size")) == ("PIPELINE", 1), tree
