"""Timelines in memory: ``TimelineWrites`` and ``TimelineReads`` with the behaviour of the Redis
``TimelineStore`` and its merge script, for unit tests only (held to it by
``tests/support/contracts/timelines.py``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from graph_service.domain.ports import TimelineWindow

__all__ = ["FakeTimelines", "merge_ids"]


def merge_ids(entries: list[int], tweet_ids: Sequence[int], cap: int) -> int:
    """``MERGE_IDS`` step by step: each ID once, newest first, in place; trimmed to ``cap`` at the end."""
    added = 0
    for tweet_id in tweet_ids:
        if not entries or tweet_id > entries[0]:
            entries.insert(0, tweet_id)
            added += 1
        elif tweet_id != entries[0]:
            if entries[-1] > tweet_id:
                if len(entries) < cap:
                    entries.append(tweet_id)
                    added += 1
            elif tweet_id != entries[-1] and tweet_id not in entries:
                place = next(i for i in range(1, len(entries)) if tweet_id > entries[i])
                entries.insert(place, tweet_id)
                added += 1
    if added and len(entries) > cap:
        del entries[cap:]
    return added


class FakeTimelines:
    def __init__(
        self,
        *,
        timeline_cap: int = 800,
        recent_cap: int = 200,
        new_follow_seconds: float = 600.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.timeline_cap = timeline_cap
        self.recent_cap = recent_cap
        self.new_follow_seconds = new_follow_seconds
        self.clock = clock
        self.new_followers: dict[int, dict[int, float]] = {}
        """Per author: follower -> when ``note_follow`` noted the follow."""
        self.homes: dict[int, list[int]] = {}
        self.recents: dict[int, list[int]] = {}
        self.tweet_authors: dict[int, int] = {}
        self.celebrity_scores: dict[int, int] = {}
        self.home_entries_read = 0
        """How many home-timeline entries ``home`` and ``window`` have returned, over all calls."""
        self.window_reads_authors = True
        """``window`` brings the entries' cached authors, as the Redis store does on a single node;
        False: it leaves them out, as on a Redis Cluster."""

    # -- TimelineWrites -------------------------------------------------------------------

    async def record_tweet(self, author_id: int, tweet_id: int) -> list[int]:
        merge_ids(self.recents.setdefault(author_id, []), [tweet_id], self.recent_cap)
        self.tweet_authors[tweet_id] = author_id
        return sorted(self._new_followers(author_id), key=str)

    async def note_follow(self, followee_id: int, follower_id: int, *, followed: bool) -> list[int]:
        noted = self.new_followers.setdefault(followee_id, {})
        if followed:
            noted[follower_id] = self.clock()
        else:
            noted.pop(follower_id, None)
        self._new_followers(followee_id)
        return list(self.recents.get(followee_id, []))

    def _new_followers(self, author_id: int) -> dict[int, float]:
        """The author's new followers, those noted longer ago than the window dropped."""
        noted = self.new_followers.setdefault(author_id, {})
        oldest = self.clock() - self.new_follow_seconds
        for follower in [f for f, at in noted.items() if at < oldest]:
            del noted[follower]
        return noted

    async def push(self, tweet_id: int, user_ids: Sequence[int]) -> None:
        for user_id in user_ids:
            merge_ids(self.homes.setdefault(user_id, []), [tweet_id], self.timeline_cap)

    async def merge(self, user_id: int, tweet_ids: Sequence[int]) -> int:
        return merge_ids(self.homes.setdefault(user_id, []), tweet_ids, self.timeline_cap)

    async def remove(self, user_id: int, tweet_ids: Sequence[int]) -> int:
        entries = self.homes.get(user_id, [])
        removed = 0
        for tweet_id in tweet_ids:
            if tweet_id in entries:
                entries.remove(tweet_id)
                removed += 1
        return removed

    async def recent(self, author_id: int) -> list[int]:
        return list(self.recents.get(author_id, []))

    async def mark_celebrity(self, author_id: int, followers: int) -> None:
        self.celebrity_scores[author_id] = followers

    async def forget_account(self, user_id: int) -> None:
        self.homes.pop(user_id, None)
        self.recents.pop(user_id, None)
        self.new_followers.pop(user_id, None)
        self.celebrity_scores.pop(user_id, None)

    async def is_celebrity(self, author_id: int) -> bool:
        return author_id in self.celebrity_scores

    # -- TimelineReads --------------------------------------------------------------------

    async def window(
        self, user_id: int, limit: int, *, older_than: int | None, pulled: Sequence[int]
    ) -> TimelineWindow:
        entries = await self.home(user_id, limit, older_than=older_than)
        authors = await self.authors(entries) if self.window_reads_authors else None
        window = TimelineWindow(entries, {}, authors, older_than, entries[-1] if len(entries) == limit else None)
        window.pulled.update((a, window.cut(ids)) for a, ids in (await self.recent_of_many(pulled)).items())
        return window

    async def home(self, user_id: int, limit: int | None = None, *, older_than: int | None = None) -> list[int]:
        entries = [t for t in self.homes.get(user_id, []) if older_than is None or t < older_than]
        entries = entries[:limit] if limit else entries
        self.home_entries_read += len(entries)
        return entries

    async def celebrities(self) -> list[int]:
        return sorted(self.celebrity_scores, key=lambda a: (self.celebrity_scores[a], str(a)))

    async def recent_of_many(self, authors: Sequence[int]) -> dict[int, list[int]]:
        return {a: list(self.recents.get(a, [])) for a in authors}

    async def authors(self, tweet_ids: Sequence[int]) -> dict[int, int]:
        return {t: self.tweet_authors[t] for t in tweet_ids if t in self.tweet_authors}

    async def fill_authors(self, found: dict[int, int]) -> None:
        self.tweet_authors.update(found)
