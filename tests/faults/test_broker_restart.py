"""The tweet path after the broker is killed (kill -9) and started again with nothing in it.

The local broker keeps nothing across a restart, which stands for what a real cluster can do too
(an unclean leader election, a topic deleted and created again): records it acknowledged are gone.
The relay and the fanout run as in production; the broker is a child process killed by PID.

Tweets are posted in four phases, and every one must reach every follower's home timeline once:
  A  before, with the fanout running (in the timelines before the kill);
  B  before, with the fanout stopped: the relay produced them and saw them acknowledged, then the
     kill loses them (the relay must notice and produce them again);
  C  while the broker is down (the relay waits and retries);
  D  after the broker is back and ``create-topics`` made the topics again.
Between the restart and ``create-topics`` nobody may create a topic (no guessed partition count),
and the relay and the fanout say they are not ready.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from socialgraph_devstack.processes import ManagedProcess, free_port, start_kafka_broker

from graph_service.dynamodb.tables import TWEETS
from graph_service.entrypoints.fanout import FanoutRuntime, build_fanout
from graph_service.entrypoints.relay import RelayRuntime, build_relay
from graph_service.events.kafka import client_options, ensure_topics
from graph_service.settings import Settings
from tests.support.figures import Record
from tests.support.graph_calls import Stub, follow
from tests.support.polling import eventually
from tests.support.runtimes import run_built
from tests.support.scrape import scrape
from tests.support.tables import require_streams
from tests.support.timeline_calls import post, pushed, raw_redis, tweet_store

pytestmark = [pytest.mark.faults, pytest.mark.streams]

AUTHOR = 500
FOLLOWERS = [501, 502, 503]


class Broker:
    """A broker of this test alone, on a port it keeps across restarts."""

    def __init__(self, log_dir: Path) -> None:
        self.port = free_port()
        self._log_dir = log_dir
        self.process: ManagedProcess = start_kafka_broker(self.port, log_dir)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def kill(self) -> None:
        os.kill(self.process.process.pid, signal.SIGKILL)
        self.process.process.wait(10)

    def start(self) -> None:
        self.process = start_kafka_broker(self.port, self._log_dir)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    value = Broker(tmp_path / "logs")
    yield value
    value.process.stop()


async def topics_on(settings: Settings) -> dict[str, int]:
    """The topics on the broker and their partition counts (asking creates nothing)."""
    admin = AIOKafkaAdminClient(**client_options(settings))
    await admin.start()
    try:
        names = [n for n in await admin.list_topics() if n in (settings.tweets_topic, settings.graph_events_topic)]
        described = await admin.describe_topics(names) if names else []
        return {str(d["topic"]): len(d["partitions"]) for d in described if d["error_code"] == 0}
    finally:
        await admin.close()


async def produced(relay: RelayRuntime) -> float:
    """Tweet events the relay saw acknowledged, from its /metrics."""
    found = (await scrape(relay.metrics_port)).value("socialgraph_relay_events_produced_total", topic="tweets")
    return found or 0.0


@contextlib.asynccontextmanager
async def fanout_running(settings: Settings) -> AsyncIterator[FanoutRuntime]:
    runtime = await build_fanout(settings)
    async with run_built(runtime):
        yield runtime


async def every_timeline_holds(settings: Settings, tweets: list[int], timeout: float = 60) -> None:  # noqa: ASYNC109 - a polling deadline
    async with raw_redis(settings) as redis:
        for user in FOLLOWERS:
            found = await eventually(
                lambda user=user: pushed(redis, user), lambda got: set(tweets) <= set(got), timeout=timeout
            )
            assert len(found) == len(set(found)), f"duplicates in {user}'s timeline: {found}"


async def test_every_tweet_reaches_every_timeline_across_a_broker_kill_and_restart(
    settings: Settings, stub: Stub, broker: Broker, figures: Record
) -> None:
    await require_streams(settings, TWEETS)
    settings = replace(
        settings,
        kafka_bootstrap_servers=broker.bootstrap,
        tweets_topic="tweets",
        graph_events_topic="graph",
        fanout_group="fanout",
        topic_partitions=3,
        topic_check_seconds=0.5,
    )
    await ensure_topics(settings)
    for follower in FOLLOWERS:
        await follow(stub, follower, AUTHOR)

    relay: RelayRuntime = await build_relay(settings)
    async with tweet_store(settings) as store, run_built(relay):
        async with fanout_running(settings):
            before = [await post(store, AUTHOR, f"A{i}") for i in range(3)]
            await every_timeline_holds(settings, before)  # A

        unseen = [await post(store, AUTHOR, f"B{i}") for i in range(3)]
        await eventually(lambda: produced(relay), lambda n: n >= 6, timeout=30)  # acknowledged

        broker.kill()
        down = [await post(store, AUTHOR, f"C{i}") for i in range(3)]  # C: the relay retries
        broker.start()

        # Back, empty: nobody creates the topics, and both processes say what is wrong.
        problem = await eventually(lambda: asyncio.sleep(0, relay.topics.problem()), bool, timeout=30)
        assert "does not exist" in (problem or "") or "did not answer" in (problem or "")
        async with fanout_running(settings) as fanout:
            for process_problem in (relay.topics.problem, fanout.worker.topics_problem):
                waited = await eventually(
                    lambda p=process_problem: asyncio.sleep(0, p()), lambda p: "does not exist" in (p or ""), timeout=30
                )
                assert "create-topics" in (waited or "")
            assert await topics_on(settings) == {}  # not auto-created by the relay's retries or the fanout

            await ensure_topics(settings)  # the operator heals it; nothing is restarted
            healed_at = time.monotonic()
            assert await topics_on(settings) == {"tweets": 3, "graph": 3}
            after = [await post(store, AUTHOR, f"D{i}") for i in range(3)]
            await every_timeline_holds(settings, before + unseen + down + after)
            figures("timelines_whole_after_create_topics_s", time.monotonic() - healed_at)

        rewinds = sum(guard.rewinds for guard in relay.guards)
        assert rewinds >= 1  # B came back through a rewind
        figures("relay_rewinds", rewinds)
        # Every rewind was a suspicion confirmed by a second look (a fetch that found the records gone).
        suspicions = sum(guard.suspicions for guard in relay.guards)
        assert suspicions - sum(guard.cleared for guard in relay.guards) >= rewinds
        figures("relay_log_suspicions", suspicions)
        assert relay.topics.problem() is None
