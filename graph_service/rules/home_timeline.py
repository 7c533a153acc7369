"""GetHomeTimeline: pushed entries merged with followed celebrities' recent tweets, newest first.

Every entry is checked against the graph when it is read: only tweets of accounts the user
follows, and does not mute, at that moment, and that are in the graph (SPEC §3b: not deactivated
or deleted), are returned. That is what makes Unfollow, Block, RemoveFollower, Mute and
DeactivateAccount hide an account's tweets as soon as they return (and Unmute and
ReactivateAccount show those still held again), whatever the fanout worker is doing, and it
needs each entry's author: from Redis (``tweet_author``), else from the tweets table. An account
out of the graph follows nobody: its own timeline is empty.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass

from graph_service.domain.account_ports import AccountStates
from graph_service.domain.errors import TimelineUnavailable
from graph_service.domain.ids import require_id
from graph_service.domain.models import TweetCursor
from graph_service.domain.ports import RelationshipReads, TimelineReads, TweetAuthors
from graph_service.domain.times import now_us
from graph_service.rules.author_memo import AuthorMemo
from graph_service.rules.limits import RuleLimits
from graph_service.rules.page_tokens import PageTokenCodec
from graph_service.rules.paging import page_size

__all__ = ["DEFAULT_PAGE_SIZE", "MAX_PAGE_SIZE", "HomeTimeline", "TimelinePage"]

DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
RELATIONSHIP_BATCH = 100
MIN_WINDOW = 32
"""Timeline entries read (and their authors looked up) at a time, at least."""
AUTHOR_MEMO_ENTRIES = 200_000
"""Tweet authors a process remembers (about 20 MB): a few thousand users' first pages."""


@dataclass(frozen=True, slots=True)
class TimelinePage:
    tweet_ids: list[int]
    next_page_token: str


class HomeTimeline:
    def __init__(
        self,
        timelines: TimelineReads | None,
        tweets: TweetAuthors,
        graph: RelationshipReads,
        limits: RuleLimits,
        states: AccountStates,
    ) -> None:
        """``timelines`` is None when Redis is switched off: then every call is ``TIMELINE_UNAVAILABLE``."""
        self._timelines = timelines
        self._tweets = tweets
        self._graph = graph
        self._states = states
        self._tokens = PageTokenCodec(*limits.page_token_secrets)
        self._celebrity_refresh = limits.celebrity_refresh_seconds
        self._celebrity_copy: tuple[float, list[int]] = (0.0, [])
        self._author_memo = AuthorMemo(AUTHOR_MEMO_ENTRIES)

    @property
    def has_timelines(self) -> bool:
        """False when Redis is switched off: there are no timelines to serve."""
        return self._timelines is not None

    async def home_timeline(self, user_id: int, requested_size: int, page_token: str) -> TimelinePage:
        require_id(user_id, "user_id")
        size = page_size(requested_size, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
        scope = f"home:{user_id}"
        cursor = self._tokens.decode_tweet(scope, page_token)
        if self._timelines is None:
            raise TimelineUnavailable("timelines need Redis (SG_REDIS_URL is empty)")
        entries = await self._page(self._timelines, user_id, size, cursor.tweet_id if cursor else None)
        if not (await self._states.states([user_id]))[user_id].in_graph:
            return TimelinePage([], "")  # asked after the page: Redis down is TIMELINE_UNAVAILABLE first
        page, more = entries[:size], len(entries) > size
        token = self._tokens.encode(scope, TweetCursor(page[-1])) if more else ""
        return TimelinePage(page, token)

    async def _page(self, timelines: TimelineReads, user_id: int, size: int, before: int | None) -> list[int]:
        """Up to ``size + 1`` readable entries older than ``before`` (one more tells if a next page exists).

        The pushed timeline is read a window at a time (``size + 1`` entries, at least
        ``MIN_WINDOW``), newest first, and merged with the followed celebrities' recent tweets down to
        the window's oldest entry; the next window, twice as large, is read only if too few entries
        were readable."""
        window = max(size + 1, MIN_WINDOW)
        pushed, celebrities = await asyncio.gather(
            timelines.home(user_id, window, older_than=before), self._celebrities(timelines)
        )
        followed = await self._following(user_id, celebrities)
        pulled = await timelines.recent_of_many([a for a, yes in followed.items() if yes])
        author_of = {t: a for a, ids in pulled.items() for t in ids}
        waiting = sorted((t for t in author_of if before is None or t < before), reverse=True)
        kept: list[int] = []
        while True:
            last = len(pushed) < window
            floor = None if last else pushed[-1]
            due = len(waiting) if floor is None else next((i for i, t in enumerate(waiting) if t < floor), len(waiting))
            candidates = sorted({*pushed, *waiting[:due]}, reverse=True)
            waiting = waiting[due:]
            kept += await self._readable(timelines, user_id, candidates, author_of, followed, size + 1 - len(kept))
            if last or len(kept) > size:
                return kept[: size + 1]
            window *= 2  # most entries filtered out: fewer, larger reads for the rest
            pushed = await timelines.home(user_id, window, older_than=pushed[-1])

    async def _readable(
        self,
        timelines: TimelineReads,
        user_id: int,
        candidates: list[int],
        author_of: dict[int, int],
        followed: dict[int, bool],
        wanted: int,
    ) -> list[int]:
        """The candidates (newest first) whose author the user follows, until ``wanted`` are found;
        ``author_of`` and ``followed`` are filled as authors and relationships are looked up."""
        kept: list[int] = []
        for start in range(0, len(candidates), MIN_WINDOW):
            part = candidates[start : start + MIN_WINDOW]
            author_of.update(await self._authors(timelines, [t for t in part if t not in author_of]))
            followed.update(
                await self._following(user_id, {author_of[t] for t in part if t in author_of} - followed.keys())
            )
            kept += [t for t in part if t in author_of and followed.get(author_of[t], False)]
            if len(kept) >= wanted:
                break
        return kept

    async def _celebrities(self, timelines: TimelineReads) -> list[int]:
        expires, members = self._celebrity_copy
        if time.monotonic() < expires:
            return members
        members = await timelines.celebrities()
        self._celebrity_copy = (time.monotonic() + self._celebrity_refresh, members)
        return members

    async def _following(self, user_id: int, accounts: Iterable[int]) -> dict[int, bool]:
        """Whether the user follows each account now, does not mute it, and it is in the graph
        (strongly consistent, through the caches): the accounts whose tweets the timeline shows."""
        wanted = set(accounts)
        others = sorted(wanted - {user_id})
        found: dict[int, bool] = dict.fromkeys(wanted, False)
        if not others:
            return found
        batches = [others[i : i + RELATIONSHIP_BATCH] for i in range(0, len(others), RELATIONSHIP_BATCH)]
        now = now_us()
        states, answers = await asyncio.gather(
            self._states.states(others), asyncio.gather(*(self._graph.relationships(user_id, b) for b in batches))
        )
        for relationships in answers:
            found.update(
                (target, r.following and not r.as_of(now).muting and states[target].in_graph)
                for target, r in relationships.items()
            )
        return found

    async def _authors(self, timelines: TimelineReads, tweet_ids: list[int]) -> dict[int, int]:
        found = self._author_memo.known(tweet_ids)
        asked = [t for t in tweet_ids if t not in found]
        if not asked:
            return found
        cached = await timelines.authors(asked)
        missing = [t for t in asked if t not in cached]
        if missing:
            stored = await self._tweets.authors(missing)
            await timelines.fill_authors(stored)
            cached.update(stored)
        self._author_memo.remember(cached)
        found.update(cached)
        return found
