"""The home timeline's window read on real Redis: on a single node one script call
(``scripts.HOME_WINDOW``) gives what the reads it replaces give (the window, the pulled authors'
recent tweets cut to its range, the entries' cached authors), as the in-memory fake does; a warm
first page is one write to Redis; on a Redis Cluster the window and the pages are the same."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Sequence
from typing import Any, ClassVar

import pytest
import redis
from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.connection import Connection
from redis.cluster import RedisCluster

from graph_service.domain.accounts import AccountStatus, Lifecycle
from graph_service.domain.models import Mute
from graph_service.domain.ports import TimelineWindow
from graph_service.entrypoints.rule_limits import rule_limits
from graph_service.redis_client.connect import build_redis
from graph_service.rules.home_timeline import HomeTimeline
from graph_service.rules.limits import RuleLimits
from graph_service.settings import Settings
from graph_service.timelines import keys
from graph_service.timelines.timeline_store import TimelineStore
from tests.support.fakes.accounts import FakeAccounts
from tests.support.fakes.graph import FakeGraph
from tests.support.fakes.timelines import FakeTimelines
from tests.support.fakes.tweets import FakeTweets

USER = 1
BIG = 2**64 - 1
STAR, QUIET, GONE = 20, 21, 22
"""A celebrity with a long recent list, one with none, one the store never heard of."""
LIMITS = rule_limits(Settings(page_token_secret="integration-secret", celebrity_refresh_seconds=3600))
FRESH_REGISTRY = rule_limits(Settings(page_token_secret="integration-secret", celebrity_refresh_seconds=0))
"""Limits whose reader reads the celebrity registry on every page (a new celebrity shows at once)."""


class CountingConnection(Connection):
    """A connection that notes the name of every command written, per write (one write, one round trip)."""

    writes: ClassVar[list[list[str]]] = []

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        payload = command if isinstance(command, bytes) else b"".join(command)
        CountingConnection.writes.append(_command_names(payload))
        await super().send_packed_command(command, check_health)


def _command_names(payload: bytes) -> list[str]:
    """The names of the RESP commands in one write (arguments here never hold a line break)."""
    lines = payload.split(b"\r\n")
    names, i = [], 0
    while i < len(lines) and lines[i].startswith(b"*"):
        count = int(lines[i][1:])
        names.append(lines[i + 2].decode().upper())
        i += 1 + 2 * count
    return names


def _store(client: Any) -> TimelineStore:
    return TimelineStore(client, timeline_cap=800, recent_cap=200, author_ttl_seconds=600)


@pytest.fixture
async def store(redis_url: str) -> AsyncIterator[TimelineStore]:
    CountingConnection.writes = []
    pool = ConnectionPool.from_url(redis_url, connection_class=CountingConnection, decode_responses=True)
    value = _store(Redis(connection_pool=pool))
    try:
        yield value
    finally:
        await value.aclose()


HOME = [BIG, 2**63 + 5, 2**63, *range(10**18 + 300, 10**18, -3), 10**17, 99, 7]
"""The pushed timeline, newest first: 64-bit IDs that Lua's doubles cannot tell apart, and short ones."""
RECENT = {STAR: [2**63 + 7, *range(10**18 + 301, 10**18 - 200, -3), 98, 3], QUIET: []}
"""The celebrities' recent tweets, between the timeline's entries (170: several of the script's
growing reads)."""
AUTHORS = {t: 1000 + i % 7 for i, t in enumerate(HOME) if i % 11 != 4}
"""Cached authors of most entries (some expired)."""


async def fill(store: TimelineStore) -> FakeTimelines:
    """The same timelines in the store and in a fake."""
    fake = FakeTimelines()
    fake.homes[USER] = list(HOME)
    fake.recents.update({a: list(ids) for a, ids in RECENT.items()})
    fake.tweet_authors.update({t: a for a, ids in RECENT.items() for t in ids})  # as record_tweet leaves them
    fake.tweet_authors.update(AUTHORS)
    await store.merge(USER, HOME)
    for author, ids in RECENT.items():
        for tweet_id in reversed(ids):
            await store.record_tweet(author, tweet_id)
    await store.fill_authors(AUTHORS)
    await store.mark_celebrity(STAR, 50_000)
    return fake


async def replaced_reads(
    store: TimelineStore, limit: int, older_than: int | None, pulled: Sequence[int]
) -> TimelineWindow:
    """The window as the reads ``HOME_WINDOW`` replaced give it, cut here."""
    entries = await store.home(USER, limit, older_than=older_than)
    floor = entries[-1] if len(entries) == limit else None
    recent = await store.recent_of_many(pulled)
    cut = {
        a: [t for t in ids if (older_than is None or t < older_than) and (floor is None or t >= floor)]
        for a, ids in recent.items()
    }
    return TimelineWindow(entries, cut, await store.authors(entries), older_than, floor)


CURSORS = [None, BIG, 2**63, 10**18 + 150, 10**18 + 151, 10**17, 8, 7, 1]
"""From the newest; entries of the list; IDs between entries; the last entry; below everything."""


async def test_the_window_script_gives_what_the_reads_it_replaces_give(store: TimelineStore) -> None:
    fake = await fill(store)
    for limit, older_than, pulled in itertools.product([1, 7, 32, 64, 500], CURSORS, [[], [STAR, QUIET, GONE]]):
        expected = await replaced_reads(store, limit, older_than, pulled)
        assert await store.window(USER, limit, older_than=older_than, pulled=pulled) == expected, (limit, older_than)
        assert await fake.window(USER, limit, older_than=older_than, pulled=pulled) == expected, (limit, older_than)
    empty = await store.window(2, 32, older_than=None, pulled=[STAR])
    assert empty == TimelineWindow([], {STAR: RECENT[STAR]}, {}, None, None)  # no timeline: its end at once


async def test_a_window_is_one_script_call(store: TimelineStore) -> None:
    await fill(store)
    await store.window(USER, 32, older_than=None, pulled=[STAR])  # the script is loaded now
    CountingConnection.writes.clear()
    await store.window(USER, 32, older_than=2**63, pulled=[STAR, QUIET])
    assert CountingConnection.writes == [["EVALSHA"]]


class Reader:
    """A ``HomeTimeline`` over the store, with the graph, the states and the tweets table in memory."""

    def __init__(self, store: TimelineStore, limits: RuleLimits = LIMITS) -> None:
        self.graph = FakeGraph()
        self.tweets = FakeTweets()
        self.accounts = FakeAccounts(self.graph)
        self.service = HomeTimeline(store, self.tweets, self.graph, limits, self.accounts)
        self.store = store
        self.author_of: dict[int, int] = {}

    async def seed(self) -> list[int]:
        """Followed, unfollowed, muted and deactivated authors' pushed tweets, a followed
        celebrity's pulled ones, an ID the tweets table does not know; what the user may read,
        newest first."""
        for author in (2, 3, 4, 5, STAR):
            self.graph.edges[(USER, author)] = 1
        self.graph.mutes[(USER, 4)] = Mute(4, 1, 0, False)
        self.accounts.stored[5] = AccountStatus(5, Lifecycle.DEACTIVATED)
        await self.store.mark_celebrity(STAR, 50_000)
        readable: list[int] = []
        for i in range(60):
            author = (2, 3, 4, 5, 6, STAR)[i % 6]  # 6 is not followed
            tweet = await self.tweets.post(author, "t")
            self.author_of[tweet.tweet_id] = author
            await self.store.record_tweet(author, tweet.tweet_id)
            if author != STAR:
                await self.store.merge(USER, [tweet.tweet_id])
            if author in (2, 3, STAR):
                readable.append(tweet.tweet_id)
        await self.store.merge(USER, [2**62])  # unknown to the tweets table: never shown
        return readable[::-1]

    async def walk(self, size: int) -> list[int]:
        seen, token = [], ""
        while True:
            page = await self.service.home_timeline(USER, size, token)
            seen += page.tweet_ids
            if not page.next_page_token:
                return seen
            token = page.next_page_token


async def test_a_warm_first_page_is_one_script_call(store: TimelineStore) -> None:
    """The first page a process reads for a user also reads the followed celebrity's tweets after
    the window; from the next on, a first page (and a page after a cursor) is one write to Redis:
    one script call, which brings the celebrity's tweets and the authors with the window."""
    reader = Reader(store)
    readable = await reader.seed()
    cold = await reader.service.home_timeline(USER, 10, "")
    assert cold.tweet_ids == readable[:10]
    CountingConnection.writes.clear()
    warm = await reader.service.home_timeline(USER, 10, "")
    assert warm == cold
    assert CountingConnection.writes == [["EVALSHA"]]
    CountingConnection.writes.clear()
    after = await reader.service.home_timeline(USER, 5, cold.next_page_token)
    assert after.tweet_ids == readable[10:15]
    assert CountingConnection.writes == [["EVALSHA"]]
    CountingConnection.writes.clear()
    filtered = await reader.service.home_timeline(USER, 20, "")  # too many entries filtered out of one window
    assert filtered.tweet_ids == readable[:20]
    assert CountingConnection.writes == [["EVALSHA"], ["EVALSHA"]]
    assert await reader.walk(7) == readable


async def test_pages_follow_changes_made_between_warm_reads(store: TimelineStore, redis_url: str) -> None:
    """An unfollow, a mute and an account leaving the graph hide at once; a celebrity followed since
    the reader's last page shows at once; an author key that expired is read from the tweets table
    and cached again."""
    reader = Reader(store, FRESH_REGISTRY)
    readable = await reader.seed()
    assert (await reader.service.home_timeline(USER, 0, "")).tweet_ids == readable[:20]
    del reader.graph.edges[(USER, 3)]
    reader.graph.mutes[(USER, 2)] = Mute(2, 1, 0, False)
    stars = [t for t in readable if reader.author_of[t] == STAR]
    assert (await reader.service.home_timeline(USER, 0, "")).tweet_ids == stars[:20]
    other = 30
    await store.mark_celebrity(other, 60_000)
    tweet = await reader.tweets.post(other, "t")
    await store.record_tweet(other, tweet.tweet_id)
    reader.graph.edges[(USER, other)] = 1
    assert (await reader.service.home_timeline(USER, 0, "")).tweet_ids == [tweet.tweet_id, *stars][:20]
    reader.accounts.stored[STAR] = AccountStatus(STAR, Lifecycle.DEACTIVATED)
    assert (await reader.service.home_timeline(USER, 0, "")).tweet_ids == [tweet.tweet_id]
    del reader.graph.mutes[(USER, 2)]
    newest_of_2 = next(t for t in readable if reader.author_of[t] == 2)
    with redis.Redis.from_url(redis_url) as raw:
        raw.delete(keys.tweet_author(newest_of_2))  # expired
    lookups = reader.tweets.lookups
    assert (await reader.service.home_timeline(USER, 1, "")).tweet_ids == [tweet.tweet_id]
    assert newest_of_2 in (await reader.service.home_timeline(USER, 0, "")).tweet_ids
    assert reader.tweets.lookups > lookups
    assert await store.authors([newest_of_2]) == {newest_of_2: 2}  # cached again


@pytest.mark.cluster
async def test_on_a_cluster_the_window_and_the_pages_are_the_same_without_the_authors(
    store: TimelineStore, redis_cluster: list[int], flushed_cluster: RedisCluster
) -> None:
    cluster = _store(build_redis(f"redis://127.0.0.1:{redis_cluster[0]}", cluster=True, settings=Settings()))
    try:
        await fill(cluster)
        await fill(store)
        for limit, older_than in itertools.product([1, 32, 500], CURSORS):
            single = await store.window(USER, limit, older_than=older_than, pulled=[STAR, QUIET, GONE])
            other = await cluster.window(USER, limit, older_than=older_than, pulled=[STAR, QUIET, GONE])
            assert other.authors is None
            assert (other.entries, other.pulled, other.floor) == (single.entries, single.pulled, single.floor)
        flushed_cluster.flushall(target_nodes=RedisCluster.PRIMARIES)
        reader = Reader(cluster)
        readable = await reader.seed()
        for _ in range(2):  # cold, then warm
            assert (await reader.service.home_timeline(USER, 20, "")).tweet_ids == readable[:20]
        assert await reader.walk(7) == readable
    finally:
        await cluster.aclose()
