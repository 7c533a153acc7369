"""GetHomeTimeline: pushed entries merged with followed celebrities' recent tweets, newest first.

Every entry is checked against the graph when it is read: only tweets of accounts the user
follows, and does not mute, at that moment, and that are in the graph (SPEC §3b: not deactivated
or deleted), are returned. That is what makes Unfollow, Block, RemoveFollower, Mute and
DeactivateAccount hide an account's tweets as soon as they return (and Unmute and
ReactivateAccount show those still held again), whatever the fanout worker is doing, and it
needs each entry's author: from Redis (``tweet_author``), else from the tweets table. An account
out of the graph follows nobody: its own timeline is empty.

A warm page costs one timelines read and one graph read, at the same time (``_page``); a page's
work is bounded by what it returns: the authors of about ``size + 1`` entries are looked at, not
those of the whole window.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from dataclasses import dataclass

from graph_service.domain.account_ports import AccountStates
from graph_service.domain.accounts import Lifecycle
from graph_service.domain.errors import TimelineUnavailable
from graph_service.domain.ids import require_id
from graph_service.domain.models import Relationship, TweetCursor
from graph_service.domain.ports import RelationshipReads, TimelineReads, TweetAuthors
from graph_service.domain.times import now_us
from graph_service.rules.author_memo import AuthorMemo, ReaderMemo, ReaderNotes
from graph_service.rules.limits import RuleLimits
from graph_service.rules.page_tokens import PageTokenCodec
from graph_service.rules.paging import page_size

__all__ = ["DEFAULT_PAGE_SIZE", "MAX_PAGE_SIZE", "HomeTimeline", "TimelinePage"]

DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100
RELATIONSHIP_BATCH = 100
MIN_WINDOW = 32
"""Timeline entries read at a time, at least (and, past a page's first ``size + 1``, whose authors
are looked up at a time)."""
AUTHOR_MEMO_ENTRIES = 200_000
"""Tweet authors a process remembers (about 20 MB): a few thousand users' first pages."""
READER_MEMO_USERS = 10_000
"""Readers whose last page a process keeps notes of (about 2 KB each: 20 MB at most)."""

GraphRead = asyncio.Future[tuple[dict[int, Lifecycle], dict[int, Relationship]]]


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
        self._readers = ReaderMemo(READER_MEMO_USERS)

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
        notes = self._readers.notes(user_id)
        entries = await self._page(self._timelines, user_id, size, cursor.tweet_id if cursor else None, notes)
        if entries is None:
            return TimelinePage([], "")  # out of the graph; Redis down is TIMELINE_UNAVAILABLE all the same
        if len(entries) <= size:
            return TimelinePage(entries, "")
        page = entries[:size]
        last, token = notes.token
        if last != page[-1]:
            token = self._tokens.encode(scope, TweetCursor(page[-1]))
            notes.token = (page[-1], token)
        return TimelinePage(page, token)

    async def _page(
        self, timelines: TimelineReads, user_id: int, size: int, before: int | None, notes: ReaderNotes
    ) -> list[int] | None:
        """Up to ``size + 1`` readable entries older than ``before`` (one more tells if a next page
        exists); None if the user is out of the graph.

        The pushed timeline is read a window at a time (``size + 1`` entries, at least
        ``MIN_WINDOW``), newest first, and merged with the followed celebrities' recent tweets down to
        the window's oldest entry; the next window, twice as large, is read only if too few entries
        were readable.

        The first window comes with its entries' cached authors and the recent tweets of the
        celebrities the user followed at their last page (``TimelineReads.window``: one script call
        on a single Redis node), while the graph is asked about every celebrity, the authors of the
        user's last page and the user (near-cache lookups behind one fence): the two round trips
        overlap. Only what that guess (``notes``) missed is read after: the recent tweets of
        celebrities followed since, the relationships of authors new to the page."""
        window = max(size + 1, MIN_WINDOW)
        celebrities = await self._celebrities(timelines)
        others = sorted({*celebrities, *notes.authors} - {user_id})
        graph = self._ask_graph(user_id, others, with_user=True)
        try:
            read = await timelines.window(
                user_id, window, older_than=before, pulled=[c for c in celebrities if c in notes.celebrities]
            )
        except BaseException:
            graph.cancel()
            await asyncio.gather(graph, return_exceptions=True)
            raise
        states, answers = await graph
        if not states[user_id].in_graph:
            return None
        followed = self._judge(others, states, answers)
        stars = [c for c in celebrities if followed.get(c)]
        missed = [c for c in stars if c not in read.pulled]
        if missed:  # followed since the user's last page (or no page of theirs read here yet)
            read.pulled.update((c, read.cut(ids)) for c, ids in (await timelines.recent_of_many(missed)).items())
        author_of: dict[int, int] = {}
        seen: set[int] = set()
        kept: list[int] = []
        while True:
            candidates = read.entries
            pulled = [(c, read.pulled[c]) for c in stars if read.pulled.get(c)]
            if pulled:
                for star, ids in pulled:
                    author_of.update(dict.fromkeys(ids, star))
                candidates = sorted({*candidates, *(t for _, ids in pulled for t in ids)}, reverse=True)
            if read.authors is not None:
                author_of.update(read.authors)
            wanted = size + 1 - len(kept)
            kept += await self._readable(
                timelines, user_id, candidates, (author_of, followed, seen), wanted, read.authors is not None
            )
            if read.floor is None or len(kept) > size:
                self._note(notes, seen, stars)
                return kept[: size + 1]
            window *= 2  # most entries filtered out: fewer, larger reads for the rest
            read = await timelines.window(user_id, window, older_than=read.floor, pulled=stars)

    async def _readable(
        self,
        timelines: TimelineReads,
        user_id: int,
        candidates: list[int],
        known: tuple[dict[int, int], dict[int, bool], set[int]],
        wanted: int,
        authors_read: bool,
    ) -> list[int]:
        """The candidates (newest first) whose author the user follows, until ``wanted`` are found:
        the first ``wanted`` looked at first, then ``MIN_WINDOW`` at a time. ``known`` (each tweet's
        author, whether each author is followed, the authors looked at) is filled as it goes.
        ``authors_read``: the tweets' authors cached in Redis are known already (the window brought
        them), so the others are not asked there again."""
        author_of, followed, seen = known
        kept: list[int] = []
        start, step = 0, wanted
        while start < len(candidates) and len(kept) < wanted:
            part = candidates[start : start + step]
            start, step = start + step, MIN_WINDOW
            unknown = [t for t in part if t not in author_of]
            if unknown:
                author_of.update(await self._authors(timelines, unknown, authors_read))
            authors = {author_of[t] for t in part if t in author_of}
            seen |= authors
            if not authors <= followed.keys():
                followed.setdefault(user_id, False)  # the user's own tweets are not among those followed
                asked = sorted(authors - followed.keys())
                if asked:
                    states, answers = await self._ask_graph(user_id, asked, with_user=False)
                    followed.update(self._judge(asked, states, answers))
            kept += [t for t in part if t in author_of and followed[author_of[t]]]
        return kept

    def _note(self, notes: ReaderNotes, seen: set[int], stars: list[int]) -> None:
        """What the next page of this reader asks the graph about while its window is read."""
        if seen != notes.authors:
            notes.authors = frozenset(sorted(seen)[:RELATIONSHIP_BATCH] if len(seen) > RELATIONSHIP_BATCH else seen)
        if len(stars) != len(notes.celebrities) or not notes.celebrities.issuperset(stars):
            notes.celebrities = frozenset(stars)

    async def _celebrities(self, timelines: TimelineReads) -> list[int]:
        expires, members = self._celebrity_copy
        if time.monotonic() < expires:
            return members
        members = await timelines.celebrities()
        self._celebrity_copy = (time.monotonic() + self._celebrity_refresh, members)
        return members

    def _ask_graph(self, user_id: int, others: list[int], *, with_user: bool) -> GraphRead:
        """Start reading the states of ``others`` (and ``with_user``, the user's) and the user's
        relationships with them (strongly consistent, through the caches), at once: their
        near-cache lookups share one fence."""
        return asyncio.gather(
            self._states.states([*others, user_id] if with_user else others), self._relationships(user_id, others)
        )

    async def _relationships(self, user_id: int, others: list[int]) -> dict[int, Relationship]:
        if len(others) <= RELATIONSHIP_BATCH:
            return await self._graph.relationships(user_id, others)
        found: dict[int, Relationship] = {}
        batches = [others[i : i + RELATIONSHIP_BATCH] for i in range(0, len(others), RELATIONSHIP_BATCH)]
        for answer in await asyncio.gather(*(self._graph.relationships(user_id, b) for b in batches)):
            found.update(answer)
        return found

    @staticmethod
    def _judge(
        others: Iterable[int], states: dict[int, Lifecycle], answers: dict[int, Relationship]
    ) -> dict[int, bool]:
        """Whether the user follows each account now, does not mute it, and it is in the graph: the
        accounts whose tweets the timeline shows."""
        found: dict[int, bool] = dict.fromkeys(others, False)
        now = now_us()
        found.update(
            (target, r.following and (r.mute_expires_us is None or not r.as_of(now).muting) and states[target].in_graph)
            for target, r in answers.items()
        )
        return found

    async def _authors(self, timelines: TimelineReads, tweet_ids: list[int], cache_read: bool) -> dict[int, int]:
        """The authors of those tweets: remembered, else cached in Redis (not asked again if
        ``cache_read``), else from the tweets table (then cached); unknown tweets are left out."""
        found = self._author_memo.known(tweet_ids)
        asked = [t for t in tweet_ids if t not in found]
        if not asked:
            return found
        cached = {} if cache_read else await timelines.authors(asked)
        missing = [t for t in asked if t not in cached]
        if missing:
            stored = await self._tweets.authors(missing)
            await timelines.fill_authors(stored)
            cached.update(stored)
        self._author_memo.remember(cached)
        found.update(cached)
        return found
