"""Timelines in Redis: pushed home timelines, authors' recent tweets, the celebrity registry and
a tweet -> author cache. Redis is where timelines live, so failures are raised, never hidden."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

from redis.asyncio import Redis
from redis.exceptions import NoScriptError

from graph_service.domain.errors import TimelineUnavailable
from graph_service.domain.ports import TimelineWindow
from graph_service.redis_client.cluster_packed import evalsha_each_key_on_cluster
from graph_service.redis_client.connect import AnyRedis
from graph_service.redis_client.failures import UNANSWERED, UNREACHABLE, retry_torn
from graph_service.redis_client.packed import evalsha_each_key, script_calls
from graph_service.timelines import keys, scripts

__all__ = ["NEW_FOLLOW_SECONDS", "TimelineStore"]

ATTEMPTS = 3
NEW_FOLLOW_SECONDS = 600.0
"""How long the fanout keeps a follow it applied among the author's new followers (the backfill
handshake, ``scripts.RECORD_TWEET``): far longer than a follower list the fanout reads can lag
the follow's commit (the write-through follows the commit by at most a Redis timeout; a cache
that could not be settled is not trusted)."""
P = ParamSpec("P")
T = TypeVar("T")


def _redis_call(
    method: Callable[Concatenate[TimelineStore, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[TimelineStore, P], Coroutine[Any, Any, T]]:
    """Redis unreachable becomes ``TimelineUnavailable``; other Redis errors (a refused command,
    out of memory) are raised as they are, since retrying cannot help them.

    redis-py#4287: a pooled connection torn down under the client surfaces as AttributeError or
    TypeError (or a ConnectionError for one closed meanwhile). Every operation here is idempotent
    and takes no iterator it could use up, so it is tried again on a fresh connection, twice at most."""

    @functools.wraps(method)
    async def wrapper(store: TimelineStore, /, *args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await retry_torn(lambda: method(store, *args, **kwargs), attempts=ATTEMPTS, also=UNREACHABLE)
        except UNANSWERED as exc:
            raise TimelineUnavailable(f"Redis did not answer: {exc}") from exc

    return wrapper


class TimelineStore:
    """``TimelineWrites`` (the fanout) and ``TimelineReads`` (the read path) on Redis."""

    def __init__(
        self,
        redis: AnyRedis,
        *,
        timeline_cap: int,
        recent_cap: int,
        author_ttl_seconds: int,
        new_follow_seconds: float = NEW_FOLLOW_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._redis = redis
        self._timeline_cap = timeline_cap
        self._recent_cap = recent_cap
        self._author_ttl = author_ttl_seconds
        self._new_follow = new_follow_seconds
        self._clock = clock
        self._merge = redis.register_script(scripts.MERGE_IDS)
        self._record = redis.register_script(scripts.RECORD_TWEET)
        self._note_follow = redis.register_script(scripts.NOTE_FOLLOW)
        self._remove = redis.register_script(scripts.REMOVE_IDS)
        self._older_than = redis.register_script(scripts.OLDER_THAN)
        self._home_window = redis.register_script(scripts.HOME_WINDOW)

    # -- writes (the fanout worker) -----------------------------------------------------------

    @_redis_call
    async def push(self, tweet_id: int, user_ids: Sequence[int]) -> None:
        """Put one tweet into each user's home timeline: one pipelined round trip (per Cluster node)."""
        if not user_ids:
            return
        try:
            await self._push(tweet_id, user_ids)
        except NoScriptError:  # a node restarted or failed over since the script was loaded
            await self._redis.script_load(scripts.MERGE_IDS)
            await self._push(tweet_id, user_ids)

    async def _push(self, tweet_id: int, user_ids: Sequence[int]) -> None:
        sha = self._merge.sha
        if isinstance(self._redis, Redis):  # one node: the batch packed once (redis_client/packed.py)
            await evalsha_each_key(self._redis, sha, [keys.home(u) for u in user_ids], [self._timeline_cap, tweet_id])
            return
        # a Cluster: packed once per master, one write each (redis_client/cluster_packed.py)
        await evalsha_each_key_on_cluster(
            self._redis, sha, [keys.home(u) for u in user_ids], [self._timeline_cap, tweet_id]
        )

    @_redis_call
    async def load_scripts(self) -> None:
        """Load the merge script on every node, so pipelined pushes can name it by hash."""
        await self._redis.script_load(scripts.MERGE_IDS)

    @_redis_call
    async def record_tweet(self, author_id: int, tweet_id: int) -> list[int]:
        """Remember the tweet among its author's recent ones, and who wrote it; return the author's
        new followers (``note_follow``), read in the same atomic step as the tweet is recorded."""
        new = await self._record(
            keys=[keys.recent(author_id), keys.new_followers(author_id)],
            args=[self._recent_cap, self._clock(), self._new_follow, tweet_id],
        )
        await self._redis.set(keys.tweet_author(tweet_id), author_id, ex=self._author_ttl)
        return [int(v) for v in new]

    @_redis_call
    async def note_follow(self, followee_id: int, follower_id: int, *, followed: bool) -> list[int]:
        """Note a follow among the followee's new followers (or forget it: unfollowed) and return the
        followee's recent tweets, newest first, read in the same atomic step."""
        recent = await self._note_follow(
            keys=[keys.recent(followee_id), keys.new_followers(followee_id)],
            args=[self._clock(), self._new_follow, follower_id, "1" if followed else "0"],
        )
        return [int(v) for v in recent]

    @_redis_call
    async def merge(self, user_id: int, tweet_ids: Sequence[int]) -> int:
        """Put tweets (in any order) into one home timeline; how many were new."""
        if not tweet_ids:
            return 0
        return int(await self._merge(keys=[keys.home(user_id)], args=[self._timeline_cap, *tweet_ids]))

    @_redis_call
    async def remove(self, user_id: int, tweet_ids: Sequence[int]) -> int:
        """Take tweets out of one home timeline; how many were there."""
        if not tweet_ids:
            return 0
        return int(await self._remove(keys=[keys.home(user_id)], args=list(tweet_ids)))

    @_redis_call
    async def forget_account(self, user_id: int) -> None:
        """A deleted account's home timeline, recent tweets and new-followers set, and its place
        among the celebrities (SPEC §3b); one slot, so one transaction."""
        pipe = self._redis.pipeline(transaction=isinstance(self._redis, Redis))
        pipe.delete(keys.home(user_id), keys.recent(user_id), keys.new_followers(user_id))
        await pipe.execute()
        await self._redis.zrem(keys.CELEBRITIES, str(user_id))

    @_redis_call
    async def mark_celebrity(self, author_id: int, followers: int) -> None:
        await self._redis.zadd(keys.CELEBRITIES, {str(author_id): followers})

    # -- reads --------------------------------------------------------------------------------

    @_redis_call
    async def window(
        self, user_id: int, limit: int, *, older_than: int | None, pulled: Sequence[int]
    ) -> TimelineWindow:
        """A window of the home timeline, the ``pulled`` authors' recent tweets in its range and, on
        a single node, its entries' cached authors: one script call (``scripts.HOME_WINDOW``), one
        round trip, the ranges cut in Redis so that only what the page merges is sent and parsed.

        On a Redis Cluster the keys live in many slots, on several nodes, so no script can read
        them together: the window and the recent tweets are read concurrently (one round trip per
        node, in parallel), the ranges cut here, and the authors left to ``authors`` (the reader
        asks only for those it does not remember)."""
        if not isinstance(self._redis, Redis):
            return await self._window_of_cluster(user_id, limit, older_than, pulled)
        call = (
            [keys.home(user_id), *(keys.recent(a) for a in pulled)],
            [limit, "" if older_than is None else older_than, keys.TWEET_AUTHOR_PREFIX, keys.TWEET_AUTHOR_SUFFIX],
        )
        # packed by hand (redis_client/packed.py): a fifth less CPU than redis-py's command path
        (reply,) = await script_calls(self._redis, self._home_window, [call])
        entries = [int(t) for t in reply[0]]
        return TimelineWindow(
            entries,
            {a: [int(t) for t in ids] for a, ids in zip(pulled, reply[2:], strict=True)},
            {t: int(a) for t, a in zip(entries, reply[1], strict=True) if a is not None},
            older_than,
            entries[-1] if len(entries) == limit else None,
        )

    async def _window_of_cluster(
        self, user_id: int, limit: int, older_than: int | None, pulled: Sequence[int]
    ) -> TimelineWindow:
        entries, recent = await asyncio.gather(self._home(user_id, limit, older_than), self._recent_of_many(pulled))
        window = TimelineWindow(entries, {}, None, older_than, entries[-1] if len(entries) == limit else None)
        window.pulled.update((a, window.cut(ids)) for a, ids in recent.items())
        return window

    @_redis_call
    async def home(self, user_id: int, limit: int | None = None, *, older_than: int | None = None) -> list[int]:
        """The pushed timeline, newest first: the first ``limit`` entries (all if None or 0) older
        than ``older_than`` (from the newest if None). Only what is asked crosses the wire and is parsed."""
        return await self._home(user_id, limit, older_than)

    async def _home(self, user_id: int, limit: int | None, older_than: int | None) -> list[int]:
        key = keys.home(user_id)
        if older_than is None:
            values = await self._redis.lrange(key, 0, limit - 1 if limit else -1)
        else:
            values = await self._older_than(keys=[key], args=[older_than, limit or 0])
        return [int(v) for v in values]

    @_redis_call
    async def recent(self, author_id: int) -> list[int]:
        """The author's recent tweets, newest first."""
        return [int(v) for v in await self._redis.lrange(keys.recent(author_id), 0, -1)]

    @_redis_call
    async def recent_of_many(self, authors: Sequence[int]) -> dict[int, list[int]]:
        return await self._recent_of_many(authors)

    async def _recent_of_many(self, authors: Sequence[int]) -> dict[int, list[int]]:
        if not authors:
            return {}
        pipe = self._redis.pipeline(transaction=False)
        for author_id in authors:
            pipe.lrange(keys.recent(author_id), 0, -1)
        replies = await pipe.execute()
        return {a: [int(v) for v in reply] for a, reply in zip(authors, replies, strict=True)}

    @_redis_call
    async def celebrities(self) -> list[int]:
        members = await self._redis.zrange(keys.CELEBRITIES, 0, -1)
        return [int(str(v)) for v in members]

    @_redis_call
    async def is_celebrity(self, author_id: int) -> bool:
        return await self._redis.zscore(keys.CELEBRITIES, str(author_id)) is not None

    @_redis_call
    async def authors(self, tweet_ids: Sequence[int]) -> dict[int, int]:
        """Cached authors of those tweets whose entry is in Redis."""
        if not tweet_ids:
            return {}
        pipe = self._redis.pipeline(transaction=False)
        for tweet_id in tweet_ids:
            pipe.get(keys.tweet_author(tweet_id))
        replies = await pipe.execute()
        return {t: int(a) for t, a in zip(tweet_ids, replies, strict=True) if a is not None}

    @_redis_call
    async def fill_authors(self, found: dict[int, int]) -> None:
        if not found:
            return
        pipe = self._redis.pipeline(transaction=False)
        for tweet_id, author_id in found.items():
            pipe.set(keys.tweet_author(tweet_id), author_id, ex=self._author_ttl)
        await pipe.execute()

    async def aclose(self) -> None:
        await self._redis.aclose()
