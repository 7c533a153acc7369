"""GetHomeTimeline and the timelines' Redis layout, on real DynamoDB Local, Redis (single node and
Cluster) and, for the follow pipeline, the real broker.

Most tests drive the timelines through ``fanout.applier.Fanout`` directly (the code the worker runs
for each event), with tweets posted to the ``tweets`` table so their authors are known, and read
them back through the gRPC ``TimelineService`` of the server under test.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from redis.cluster import RedisCluster
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph_devstack.processes import free_port, start_redis

from fanout.applier import Fanout
from graph_service.domain.models import Edge
from graph_service.domain.tweet_ids import TweetIdGenerator, created_at_us
from graph_service.entrypoints.fanout import build_fanout
from graph_service.entrypoints.server import ServerRuntime
from graph_service.events.kinds import Follow, TweetPosted
from graph_service.rules.page_tokens import PageTokenCodec
from graph_service.settings import Settings
from graph_service.timelines import keys
from graph_service.timelines.timeline_store import TimelineStore
from graph_service.tweets.tweet_store import DynamoTweetStore
from tests.support.graph_calls import Stub, block, counts, follow, rejected, remove_follower, unblock, unfollow
from tests.support.polling import eventually
from tests.support.runtimes import (
    make_settings,
    running_counters,
    running_fanout,
    running_relay,
    running_server,
    stub_for,
)
from tests.support.seeding import seed_follows, seed_tweets
from tests.support.tables import create_tables, drop_tables
from tests.support.timeline_calls import (
    TimelineStub,
    home,
    pushed,
    raw_redis,
    timeline_becomes,
    timeline_stub_for,
    tweet_store,
)

INVALID = grpc.StatusCode.INVALID_ARGUMENT
CAP = 800
SMALL_CAP = 100
"""The cap the fanout test runs with: what is kept is the same rule at any cap (the production cap's
800 are pushed without the fanout's DynamoDB reads, for the memory figure); 850 tweets through the
fanout cost most of this module's CPU."""


# -- helpers ----------------------------------------------------------------------------------------


@dataclass
class Driver:
    """Posts tweets to the tweets table and applies events with the fanout code, as the worker would."""

    tweets: DynamoTweetStore
    fanout: Fanout
    timelines: TimelineStore

    async def post(self, author: int, n: int = 1, *, concurrency: int = 50) -> list[int]:
        """``n`` tweets of ``author`` in the tweets table, oldest first (their IDs increase)."""
        ids: list[int] = []
        for start in range(0, n, concurrency):
            chunk = await asyncio.gather(
                *(self.tweets.post(author, f"tweet {i}") for i in range(start, min(n, start + concurrency)))
            )
            ids += [t.tweet_id for t in chunk]
        return sorted(ids)

    async def deliver(self, author: int, tweet_ids: Sequence[int], *, concurrency: int = 1) -> int:
        """Apply TweetCreated of each tweet (in the given order; ``concurrency`` at a time)."""
        written = 0
        for start in range(0, len(tweet_ids), concurrency):
            chunk = tweet_ids[start : start + concurrency]
            done = await asyncio.gather(*(self.fanout.tweet(TweetPosted(t, author, created_at_us(t))) for t in chunk))
            written += sum(done)
        return written

    async def tweet(self, author: int, n: int = 1) -> list[int]:
        """Post and deliver, one by one: ``n`` tweets of ``author``, oldest first."""
        ids = []
        for _ in range(n):
            (tweet_id,) = await self.post(author)
            await self.deliver(author, [tweet_id])
            ids.append(tweet_id)
        return ids

    async def follow_event(self, follower: int, followee: int, followed: bool) -> None:
        await self.fanout.follow(Follow(follower, followee, followed, 0))


@contextlib.asynccontextmanager
async def direct_fanout(settings: Settings) -> AsyncIterator[Driver]:
    """The fanout of ``settings``, wired as the worker is (its own Redis and DynamoDB clients, scripts loaded)."""
    runtime = await build_fanout(settings)
    try:
        async with tweet_store(settings) as tweets:
            yield Driver(tweets, runtime.fanout, runtime.timelines)
    finally:
        await runtime.aclose()


async def pages(stub: TimelineStub, user: int, page_size: int) -> list[list[int]]:
    """Every page of the user's timeline; checks that only the last page has an empty token and that
    no page before it is empty."""
    found: list[list[int]] = []
    token = ""
    while True:
        page = await home(stub, user, page_size, token)
        found.append(list(page.tweet_ids))
        if not page.next_page_token:
            return found
        assert page.tweet_ids, f"page {len(found)} is empty but has a next_page_token"
        token = page.next_page_token
        assert len(found) < 1000, "the walk does not end"


async def timeline(stub: TimelineStub, user: int, page_size: int = 100) -> list[int]:
    return [t for page in await pages(stub, user, page_size) for t in page]


def newest_first(ids: Sequence[int]) -> list[int]:
    return sorted(ids, reverse=True)


# -- 1. the cap and the Redis layout --------------------------------------------------------------


async def test_timeline_keeps_the_newest_800_newest_first_at_most_16_bytes_an_entry(
    settings: Settings, server: ServerRuntime, stub: Stub
) -> None:
    """Through the fanout with a lowered cap (``SMALL_CAP``), 20 tweets more than it: the follower's
    Redis list and GetHomeTimeline hold exactly the newest ones, newest first, in full pages;
    redelivering evicted or present tweets changes nothing. At the production cap, 850 pushes of the
    push script keep exactly the newest 800, at most 16 bytes of Redis memory per entry."""
    author, fan, full_fan = 7, 1, 2
    await follow(stub, fan, author)
    async with (
        direct_fanout(replace(settings, timeline_cap=SMALL_CAP)) as driver,
        direct_fanout(settings) as production,
        raw_redis(settings) as client,
        timeline_stub_for(server.port) as timelines,
    ):
        ids = await seed_tweets(settings, author, SMALL_CAP + 20)  # in batches: posting is not this test's subject
        # In order of posting, 25 events at a time (so neighbours also arrive out of order).
        assert await driver.deliver(author, ids, concurrency=25) == SMALL_CAP + 20
        newest = newest_first(ids)[:SMALL_CAP]

        assert await client.llen(keys.home(fan)) == SMALL_CAP
        assert await pushed(client, fan) == newest

        walked = await pages(timelines, fan, 20)
        assert [len(p) for p in walked] == [20] * (SMALL_CAP // 20)
        assert [t for p in walked for t in p] == newest

        # Redelivery of the 20 evicted tweets and of 10 present ones: nothing changes.
        await driver.deliver(author, ids[:20] + ids[-10:], concurrency=10)
        assert await pushed(client, fan) == newest

        # The production cap, filled by the push the fanout makes for each tweet (the same script,
        # 25 at a time), without the tweets table and the follower reads around it.
        generator = TweetIdGenerator()
        full_ids = [generator.next_id() for _ in range(CAP + 50)]
        for start in range(0, len(full_ids), 25):
            await asyncio.gather(*(production.timelines.push(t, [full_fan]) for t in full_ids[start : start + 25]))
        assert await client.llen(keys.home(full_fan)) == CAP
        assert await pushed(client, full_fan) == newest_first(full_ids)[:CAP]

        used = await client.memory_usage(keys.home(full_fan), samples=0)
        assert used is not None
        per_entry = used / CAP
        print(f"\nhome_timeline with {CAP} entries: MEMORY USAGE {used} bytes = {per_entry:.2f} bytes/entry")
        assert per_entry <= 16, f"{per_entry:.2f} bytes per entry"


# -- 2. ordering and idempotency of the merge -----------------------------------------------------


async def test_out_of_order_and_duplicate_deliveries_give_each_tweet_once_newest_first(
    settings: Settings, server: ServerRuntime, stub: Stub
) -> None:
    """Tweets of two authors delivered shuffled, repeated and concurrently, plus a repeated follow
    backfill: every timeline holds each tweet once, newest first, in Redis and through the RPC."""
    alice, bob = 10, 11
    early, late = 1, 2  # ``late`` follows alice only after half of her tweets were delivered
    for fan in (early, late):
        await follow(stub, fan, bob)
    await follow(stub, early, alice)
    async with (
        direct_fanout(settings) as driver,
        raw_redis(settings) as client,
        timeline_stub_for(server.port) as timelines,
    ):
        posted: list[tuple[int, int]] = []  # (author, tweet), alternating authors, oldest first
        for i in range(12):
            author = alice if i % 2 == 0 else bob
            posted += [(author, t) for t in await driver.post(author)]
        rng = random.Random(4)
        first, second = posted[:6], posted[6:]
        for part in (first, second):
            plan = part + rng.sample(part, 4)  # every tweet once, four of them twice
            rng.shuffle(plan)
            for author, tweet_id in plan:
                await driver.deliver(author, [tweet_id])
            if part is first:
                await follow(stub, late, alice)
        everything = newest_first([t for _, t in posted])
        of_alice = {t for a, t in posted if a == alice}
        assert await pushed(client, early) == everything
        # ``late`` missed alice's first tweets until the follow's backfill brings them (twice: idempotent).
        assert await pushed(client, late) == [t for t in everything if t not in of_alice or t > posted[5][1]]
        for _ in range(2):
            await driver.follow_event(late, alice, followed=True)
            assert await pushed(client, late) == everything
        # The same events again, all at once (concurrent redelivery): nothing changes.
        await asyncio.gather(*(driver.deliver(a, [t]) for a, t in posted))
        for fan in (early, late):
            assert await pushed(client, fan) == everything
        for fan in (early, late):
            got = await timeline(timelines, fan, page_size=5)
            assert got == everything
            assert len(set(got)) == len(got)


# -- 3. celebrities: registry, pull, merge --------------------------------------------------------


async def test_a_celebritys_tweets_are_pulled_not_pushed_and_merged_in_order(
    settings: Settings, server: ServerRuntime, stub: Stub, counters: asyncio.Task[None]
) -> None:
    """An author at the (lowered) threshold is recorded in ``celebrities``; their tweets reach no
    home_timeline list, yet every follower's GetHomeTimeline shows them, merged newest first with
    a normal author's pushed tweets; a non-follower never sees them; an unfollow hides them at once."""
    star, normal = 100, 200
    fans = [1, 2, 3]
    outsider = 4  # follows only the normal author
    for fan in fans:
        await follow(stub, fan, star)
    await follow(stub, 1, normal)
    await follow(stub, outsider, normal)
    await eventually(lambda: counts(stub, star), lambda c: c[0] == 3)
    await eventually(lambda: counts(stub, normal), lambda c: c[0] == 2)

    celebrity_settings = replace(settings, celebrity_threshold=3)
    async with (
        direct_fanout(celebrity_settings) as driver,
        raw_redis(settings) as client,
        timeline_stub_for(server.port) as timelines,
    ):
        order: list[tuple[int, int]] = []
        for author in (normal, star, normal, star, normal, star):
            (tweet_id,) = await driver.tweet(author)
            order.append((author, tweet_id))
        by_star = newest_first([t for a, t in order if a == star])
        by_normal = newest_first([t for a, t in order if a == normal])

        assert int(await client.zscore(keys.CELEBRITIES, str(star)) or 0) >= 3
        assert await client.zscore(keys.CELEBRITIES, str(normal)) is None
        assert [int(v) for v in await client.lrange(keys.recent(star), 0, -1)] == by_star
        for user in (*fans, outsider):
            assert not set(by_star) & set(await pushed(client, user)), f"a celebrity tweet was pushed to {user}"
        assert await pushed(client, 1) == by_normal
        assert await pushed(client, outsider) == by_normal

        assert await timeline(timelines, 1, page_size=2) == newest_first([t for _, t in order])
        for fan in fans[1:]:
            assert await timeline(timelines, fan) == by_star
        assert await timeline(timelines, outsider) == by_normal
        assert await timeline(timelines, 999) == []

        await unfollow(stub, 2, star)
        assert await timeline(timelines, 2) == []
        await follow(stub, 2, star)
        assert await timeline(timelines, 2) == by_star


async def test_a_fanout_whose_follower_count_lags_stops_at_the_threshold_and_pulls_the_rest(
    settings: Settings, server: ServerRuntime
) -> None:
    """Counts never made (no counters consumer here) must not let one record push to every follower
    of a large account: the fanout stops after the threshold, marks the author a celebrity, and
    every follower still reads the tweet (the rest by pull)."""
    author, fans = 300, list(range(1, 26))
    await seed_follows(settings, [(fan, author) for fan in fans])  # following is not this test's subject
    async with (
        direct_fanout(replace(settings, celebrity_threshold=10, fanout_batch_size=4)) as driver,
        raw_redis(settings) as client,
        timeline_stub_for(server.port) as timelines,
    ):
        (tweet_id,) = await driver.post(author)
        assert await driver.deliver(author, [tweet_id]) == 10
        assert sum([await pushed(client, fan) == [tweet_id] for fan in fans]) == 10
        assert await client.zscore(keys.CELEBRITIES, str(author)) is not None
        reads = await asyncio.gather(*(timeline(timelines, fan) for fan in fans))
        assert reads == [[tweet_id]] * len(fans)


async def test_without_redis_the_timeline_service_is_not_serving_and_calls_are_unavailable(
    dynamodb_local: str,
) -> None:
    """SG_REDIS_URL empty: the graph still serves (from DynamoDB), the health service says
    TimelineService is NOT_SERVING, and GetHomeTimeline is UNAVAILABLE / TIMELINE_UNAVAILABLE."""
    settings = make_settings(dynamodb_local, "")
    await create_tables(settings, streams=False)
    try:
        async with running_server(settings) as server, timeline_stub_for(server.port) as timelines:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
                health = health_pb2_grpc.HealthStub(channel)
                graph = await health.Check(health_pb2.HealthCheckRequest(service="socialgraph.v1.SocialGraphService"))
                timeline_health = await health.Check(
                    health_pb2.HealthCheckRequest(service="socialgraph.v1.TimelineService")
                )
            assert graph.status == health_pb2.HealthCheckResponse.SERVING
            assert timeline_health.status == health_pb2.HealthCheckResponse.NOT_SERVING
            await rejected(home(timelines, 1), grpc.StatusCode.UNAVAILABLE, "TIMELINE_UNAVAILABLE")
    finally:
        await drop_tables(settings)


# -- 4. graph changes reach the read path --------------------------------------------------------


async def test_unfollow_block_remove_follower_and_mute_hide_the_author_at_once_and_a_refollow_shows_them(
    settings: Settings, server: ServerRuntime, stub: Stub
) -> None:
    """No worker runs, so the pushed entries stay in Redis; still, as soon as Unfollow, Block (either
    way), RemoveFollower or Mute returns, GetHomeTimeline drops the author's tweets; re-following
    (or Unmute) brings them back."""
    hidden, kept = 10, 20
    unfollower, blocked_by_author, blocking_author, removed, muter = 1, 2, 3, 4, 5
    users = [unfollower, blocked_by_author, blocking_author, removed, muter]
    for user in users:
        await follow(stub, user, hidden)
        await follow(stub, user, kept)
    async with (
        direct_fanout(settings) as driver,
        raw_redis(settings) as client,
        timeline_stub_for(server.port) as timelines,
    ):
        of_hidden: list[int] = []
        of_kept: list[int] = []
        for _ in range(3):
            of_hidden += await driver.tweet(hidden)
            of_kept += await driver.tweet(kept)
        everything = newest_first(of_hidden + of_kept)
        for user in users:
            assert await timeline(timelines, user) == everything

        cut = {
            unfollower: unfollow(stub, unfollower, hidden),
            blocked_by_author: block(stub, hidden, blocked_by_author),
            blocking_author: block(stub, blocking_author, hidden),
            removed: remove_follower(stub, hidden, removed),
            muter: stub.Mute(pb.MuteRequest(muter_id=muter, muted_id=hidden)),
        }
        for user, call in cut.items():
            await call
            assert await timeline(timelines, user) == newest_first(of_kept), user
            assert await timeline(timelines, user, page_size=1) == newest_first(of_kept), user
            assert await pushed(client, user) == everything  # still in Redis: the read path filters

        restore = {
            unfollower: follow(stub, unfollower, hidden),
            blocked_by_author: unblock(stub, hidden, blocked_by_author),
            blocking_author: unblock(stub, blocking_author, hidden),
            removed: follow(stub, removed, hidden),
            muter: stub.Unmute(pb.UnmuteRequest(muter_id=muter, muted_id=hidden)),
        }
        for user, call in restore.items():
            await call
            if user in (blocked_by_author, blocking_author):
                assert await timeline(timelines, user) == newest_first(of_kept)  # Unblock restores nothing
                await follow(stub, user, hidden)
            assert await timeline(timelines, user) == everything, user


async def test_a_new_follow_brings_the_followees_recent_tweets_through_the_pipeline(
    event_settings: Settings, server: ServerRuntime, stub: Stub
) -> None:
    """Relay + fanout running: tweets posted before a follow appear in the new follower's timeline
    soon after the Follow (FollowEvent backfill); an Unfollow hides them at once and its event takes
    them out of the Redis list; a re-follow brings them back."""
    author, fan, other = 10, 1, 2
    await follow(stub, other, author)
    async with (
        running_relay(event_settings),
        running_fanout(event_settings) as (worker, _),
        timeline_stub_for(server.port) as timelines,
        tweet_store(event_settings) as tweets,
        raw_redis(event_settings) as client,
    ):
        posted = [(await tweets.post(author, f"t{i}")).tweet_id for i in range(3)]
        expected = newest_first(posted)
        await timeline_becomes(timelines, other, expected)  # the tweets went through the pipeline
        assert await timeline(timelines, fan) == []

        await follow(stub, fan, author)
        await timeline_becomes(timelines, fan, expected)
        assert await pushed(client, fan) == expected

        await unfollow(stub, fan, author)
        assert await timeline(timelines, fan) == []
        await eventually(lambda: pushed(client, fan), lambda got: got == [])

        await follow(stub, fan, author)
        await timeline_becomes(timelines, fan, expected)
        await eventually(lambda: pushed(client, fan), lambda got: got == expected)
        assert worker.stats.handled["follow"] >= 3  # follow, unfollow, follow of ``fan``
        assert not worker.stats.skipped


# -- 5. paging ------------------------------------------------------------------------------------


async def test_paging_defaults_clamps_and_walks_without_repeats_gaps_or_empty_pages(
    settings: Settings, server: ServerRuntime, stub: Stub
) -> None:
    """Default page 20, larger than 100 clamped to 100; every page size walks the whole timeline with
    no repeat or gap; long runs of filtered entries (an unfollowed author) never make a non-last page
    empty; the last page has an empty token; tweets arriving mid-walk do not disturb the walk."""
    liked, dropped = 10, 20
    reader, everyone = 1, 2  # ``reader`` unfollows ``dropped`` later; ``everyone`` keeps both
    for user in (reader, everyone):
        await follow(stub, user, liked)
        await follow(stub, user, dropped)
    async with direct_fanout(settings) as driver, timeline_stub_for(server.port) as timelines:
        # Oldest to newest: 40 dropped, 25 liked, 150 dropped, 25 liked, 10 dropped.
        plan = [(dropped, 40), (liked, 25), (dropped, 150), (liked, 25), (dropped, 10)]
        by_liked: list[int] = []
        every: list[int] = []
        for author, n in plan:
            ids = await driver.post(author, n)
            await driver.deliver(author, ids, concurrency=25)
            every += ids
            if author == liked:
                by_liked += ids
        every = newest_first(every)
        by_liked = newest_first(by_liked)
        await unfollow(stub, reader, dropped)

        first = await home(timelines, everyone)
        assert list(first.tweet_ids) == every[:20]
        assert first.next_page_token
        clamped = await home(timelines, everyone, page_size=1000)
        assert list(clamped.tweet_ids) == every[:100]
        assert clamped.next_page_token
        exact = await home(timelines, everyone, page_size=100)
        assert list(exact.tweet_ids) == every[:100]

        # Page size 1 is walked on ``reader``'s filtered timeline below (250 calls here added nothing).
        for size in (0, 7, 20, 33, 100, 101):
            walked = await pages(timelines, everyone, size)
            per_page = min(size or 20, 100)
            assert all(len(p) == per_page for p in walked[:-1]), (size, [len(p) for p in walked])
            assert [t for p in walked for t in p] == every, size

        for size in (0, 1, 3, 7, 24, 25, 26, 49, 50, 51, 100):
            walked = await pages(timelines, reader, size)
            per_page = min(size or 20, 100)
            assert all(len(p) == per_page for p in walked[:-1]), (size, [len(p) for p in walked])
            assert 0 < len(walked[-1]) <= per_page, (size, [len(p) for p in walked])
            assert [t for p in walked for t in p] == by_liked, size

        # A walk during which new tweets arrive goes on where it was: no repeat, no gap.
        page = await home(timelines, everyone, 30)
        seen = list(page.tweet_ids)
        newer = await driver.tweet(liked, 3)
        while page.next_page_token:
            page = await home(timelines, everyone, 30, page.next_page_token)
            seen += page.tweet_ids
        assert seen == every
        assert (await home(timelines, everyone, 3)).tweet_ids == newest_first(newer)


# -- 6. bad input and Redis down ------------------------------------------------------------------


async def test_bad_input_is_invalid_argument_and_changes_nothing(
    settings: Settings, server: ServerRuntime, stub: Stub
) -> None:
    """user_id 0, a negative page_size, forged, corrupted, foreign and cross-query tokens are
    INVALID_ARGUMENT with the right reason; timelines and Redis are as they were."""
    author = 10
    for user in (1, 2):
        await follow(stub, user, author)
    async with (
        direct_fanout(settings) as driver,
        raw_redis(settings) as client,
        timeline_stub_for(server.port) as timelines,
    ):
        ids = newest_first(await driver.tweet(author, 5))
        # A valid token of another query (taken first: the list read fills the graph cache).
        followers_token = (
            await stub.ListFollowers(pb.ListFollowersRequest(user_id=author, page_size=1))
        ).next_page_token
        assert followers_token

        async def state() -> tuple[list[int], list[int], list[int], list[int], int]:
            return (
                await timeline(timelines, 1),
                await timeline(timelines, 2),
                await pushed(client, 1),
                await pushed(client, 2),
                await client.dbsize(),
            )

        before = await state()
        assert before[0] == before[1] == ids

        info = await rejected(home(timelines, 0), INVALID, "INVALID_USER_ID")
        assert info.metadata["field"] == "user_id"
        await rejected(home(timelines, 1, page_size=-1), INVALID, "INVALID_PAGE_SIZE")
        await rejected(home(timelines, 1, page_size=-(2**31)), INVALID, "INVALID_PAGE_SIZE")

        mine = (await home(timelines, 1, 2)).next_page_token
        theirs = (await home(timelines, 2, 2)).next_page_token
        assert mine
        assert theirs
        assert list((await home(timelines, 1, 2, mine)).tweet_ids) == ids[2:4]  # the token itself is good

        body, mac = mine.split(".")
        flipped = body[:5] + ("A" if body[5] != "A" else "B") + body[6:]
        other_secret = PageTokenCodec("not-the-servers-secret").encode("home:1", Edge(user_id=ids[1], at_us=0))
        bad_tokens = {
            "foreign (another user's timeline)": theirs,
            "corrupted body": f"{flipped}.{mac}",
            "corrupted mac": f"{body}.{mac[::-1]}",
            "truncated": mine[:-3],
            "signed with another secret": other_secret,
            "from ListFollowers": followers_token,
            "garbage": "not-a-token",
            "empty parts": ".",
        }
        for what, token in bad_tokens.items():
            try:
                await rejected(home(timelines, 1, 2, token), INVALID, "INVALID_PAGE_TOKEN")
            except AssertionError as exc:
                raise AssertionError(f"{what} token: {exc}") from exc

        assert await state() == before


async def test_redis_down_is_unavailable_timeline_unavailable(dynamodb_local: str, tmp_path: Path) -> None:
    """With the Redis that holds the timelines stopped, GetHomeTimeline is UNAVAILABLE with reason
    TIMELINE_UNAVAILABLE (not an empty timeline); once Redis is back the call answers again."""
    port = free_port()
    logs, data = tmp_path / "logs", tmp_path / "redis"
    process = start_redis(port, logs, data)
    settings = make_settings(dynamodb_local, f"redis://127.0.0.1:{port}/0", redis_timeout_seconds=0.5)
    await create_tables(settings, streams=False)
    try:
        async with (
            running_server(settings) as server,
            stub_for(server.port) as stub,
            timeline_stub_for(server.port) as timelines,
        ):
            await follow(stub, 1, 10)
            async with direct_fanout(settings) as driver:
                posted = await driver.tweet(10, 2)
            assert await timeline(timelines, 1) == newest_first(posted)

            process.stop()
            await rejected(home(timelines, 1), grpc.StatusCode.UNAVAILABLE, "TIMELINE_UNAVAILABLE")
            await rejected(home(timelines, 1, 5), grpc.StatusCode.UNAVAILABLE, "TIMELINE_UNAVAILABLE")

            process = start_redis(port, logs, data)  # empty: it kept nothing
            await eventually(lambda: timeline(timelines, 1), lambda got: got == [], timeout=10)
    finally:
        process.stop()
        await drop_tables(settings)


# -- 7. Redis Cluster -----------------------------------------------------------------------------


@pytest.mark.cluster
async def test_fanout_and_reads_on_a_redis_cluster(
    dynamodb_local: str, redis_cluster: list[int], flushed_cluster: RedisCluster
) -> None:
    """On the 3-master cluster: a tweet fans out to 40 followers whose timelines live on all three
    masters, a celebrity's tweets are pulled across nodes, and every follower reads both merged."""
    settings = make_settings(dynamodb_local, f"redis://127.0.0.1:{redis_cluster[0]}", redis_cluster=True)
    await create_tables(settings, streams=True)
    pushed_author, star = 1000, 2000
    fans = list(range(1, 41))
    assert len({flushed_cluster.get_node_from_key(keys.home(u)).port for u in fans}) == 3
    try:
        async with (
            running_server(settings) as server,
            stub_for(server.port) as stub,
            timeline_stub_for(server.port) as timelines,
            running_counters(settings),
        ):
            # Following is not this test's subject: the edges go straight into the tables.
            await seed_follows(settings, [(fan, star) for fan in fans] + [(fan, pushed_author) for fan in fans[:30]])
            await eventually(lambda: counts(stub, star), lambda c: c[0] == 40)
            await eventually(lambda: counts(stub, pushed_author), lambda c: c[0] == 30)

            async with direct_fanout(replace(settings, celebrity_threshold=35, fanout_batch_size=7)) as driver:
                order: list[tuple[int, int]] = []
                for author in (pushed_author, star, pushed_author, star, pushed_author):
                    (tweet_id,) = await driver.tweet(author)
                    order.append((author, tweet_id))
                # a redelivery changes nothing
                await driver.deliver(pushed_author, [order[0][1]])
            by_pushed = newest_first([t for a, t in order if a == pushed_author])
            by_star = newest_first([t for a, t in order if a == star])

            assert flushed_cluster.zscore(keys.CELEBRITIES, str(star)) is not None
            for fan in fans:
                stored = [int(v) for v in flushed_cluster.lrange(keys.home(fan), 0, -1)]
                assert stored == (by_pushed if fan in fans[:30] else []), fan
            reads = await asyncio.gather(*(timeline(timelines, fan, page_size=2) for fan in fans))
            for fan, got in zip(fans, reads, strict=True):
                assert got == newest_first(by_pushed + by_star if fan in fans[:30] else by_star), fan
            assert await timeline(timelines, 41) == []
    finally:
        await drop_tables(settings)
