"""What the fanout of one tweet counts: a celebrity's tweet is a skip, a pushed one is not."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from fanout.applier import Fanout, FanoutConfig
from graph_service.domain.models import Counts
from graph_service.events.kinds import TweetPosted
from graph_service.telemetry.fanout import FanoutMetrics
from tests.support.fakes.accounts import ALL_ACTIVE
from tests.support.fakes.graph import FakeGraph
from tests.support.fakes.timelines import FakeTimelines

CONFIG = FanoutConfig(batch_size=3, celebrity_threshold=10)


def author_with(followers: int, author: int) -> FakeGraph:
    graph = FakeGraph()
    for follower in range(100, 100 + followers):
        graph.edges[(follower, author)] = follower
    graph.set_counts(author, Counts(followers=followers))
    return graph


async def test_only_a_celebrity_s_tweet_counts_as_a_skip() -> None:
    registry = CollectorRegistry()
    metrics = FanoutMetrics(registry)
    await Fanout(author_with(12, 1), FakeTimelines(), CONFIG, states=ALL_ACTIVE, metrics=metrics).tweet(
        TweetPosted(5000, 1, 0)
    )
    await Fanout(author_with(4, 2), FakeTimelines(), CONFIG, states=ALL_ACTIVE, metrics=metrics).tweet(
        TweetPosted(5001, 2, 0)
    )
    assert registry.get_sample_value("socialgraph_fanout_celebrity_skips_total") == 1
