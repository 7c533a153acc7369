"""What one event does to the timelines (``Fanout.apply``: the handler of every kind of event).
Every step is idempotent, so a redelivered event changes nothing: the merge script keeps each tweet
once, in newest-first order."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import assert_never

import structlog

from graph_service.domain.account_ports import AccountStates
from graph_service.domain.models import EdgePage
from graph_service.domain.ports import FollowerSource, TimelineWrites
from graph_service.events.kinds import KIND_NAMES, AccountChange, AccountChanged, Event, Follow, TweetPosted
from graph_service.telemetry.fanout import FanoutMetrics

__all__ = ["Fanout", "FanoutConfig"]

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class FanoutConfig:
    batch_size: int
    """SG_FANOUT_BATCH_SIZE: the followers read (and pushed to) per page."""
    celebrity_threshold: int
    """SG_CELEBRITY_THRESHOLD: an author with this many followers is pulled at read time, not pushed."""


class Fanout:
    def __init__(
        self,
        graph: FollowerSource,
        timelines: TimelineWrites,
        config: FanoutConfig,
        *,
        states: AccountStates,
        metrics: FanoutMetrics | None = None,
    ) -> None:
        """``states``: the authors' lifecycle states, strongly consistent (a tweet of an account out
        of the graph is not fanned out)."""
        self._states = states
        self._metrics = metrics if metrics is not None else FanoutMetrics(kinds=KIND_NAMES)
        self._graph = graph
        self._timelines = timelines
        self._batch = config.batch_size
        self._threshold = config.celebrity_threshold

    async def apply(self, event: Event) -> int:
        """Apply one event of any kind; returns how many home timelines a tweet was pushed to."""
        match event:
            case TweetPosted():
                return await self.tweet(event)
            case Follow():
                await self.follow(event)
                return 0
            case AccountChanged():
                await self.account(event)
                return 0
            case _:
                assert_never(event)

    async def tweet(self, event: TweetPosted) -> int:
        """Record the tweet as its author's; push it to every follower unless the author is a
        celebrity (then readers pull it). Returns how many timelines were written."""
        author = event.author_id
        if not (await self._states.states([author]))[author].in_graph:
            # Deactivated or deleted (SPEC §3b): neither recorded nor pushed; readers would not
            # show it either.
            self._metrics.away_skips.inc()
            log.info("fanout_author_away", author_id=author, tweet_id=event.tweet_id)
            return 0
        new_followers = await self._timelines.record_tweet(author, event.tweet_id)
        followers = await self._graph.follower_count(author)
        if followers >= self._threshold:
            await self._timelines.mark_celebrity(author, followers)
            self._metrics.celebrity_skips.inc()
            log.info("fanout_pull_only", author_id=author, tweet_id=event.tweet_id, followers=followers)
            return 0
        # Followers whose follow this fanout applied lately: the list read below may not show them
        # yet (the backfill handshake; their backfill ran before this tweet was recorded). A push
        # twice to one timeline changes nothing, so they are not counted or left out below.
        await self._timelines.push(event.tweet_id, new_followers)
        written = 0
        async with contextlib.aclosing(self._follower_pages(author)) as pages:
            async for page in pages:
                await self._timelines.push(event.tweet_id, page[: self._threshold - written])
                written += min(len(page), self._threshold - written)
                if written >= self._threshold:
                    # The count lagged (or was never made): an author with this many followers is
                    # pulled from now on, and its followers not yet pushed to read this tweet that way.
                    await self._timelines.mark_celebrity(author, written)
                    log.warning("fanout_count_lagged", author_id=author, counted=followers, pushed=written)
                    break
        return written

    async def follow(self, event: Follow) -> None:
        """A new follow brings the followee's recent tweets into the follower's timeline (a celebrity's
        are pulled at read time anyway); a removed one takes them out again, to free the room.
        Noting the follow and reading the recent tweets is one step (``TimelineWrites.note_follow``):
        a tweet recorded after it is pushed to this follower by ``tweet`` instead."""
        recent = await self._timelines.note_follow(event.followee_id, event.follower_id, followed=event.followed)
        if not event.followed:
            await self._timelines.remove(event.follower_id, recent)
        elif not await self._timelines.is_celebrity(event.followee_id):
            await self._timelines.merge(event.follower_id, recent)

    async def account(self, event: AccountChanged) -> None:
        """A deleted account's home timeline and recent tweets go (its job removes them too; this
        also catches a tweet of it fanned out just before the deletion). A deactivation changes no
        timeline: its tweets stay where they were pushed, hidden while it is away (readers check
        each author's state), and are shown again when it comes back; the follows its job restores
        are not new follows, so nothing is backfilled twice."""
        if event.change is AccountChange.DELETED:
            await self._timelines.forget_account(event.user_id)

    async def _follower_pages(self, author: int) -> AsyncGenerator[list[int], None]:
        """The author's followers page by page; the next page is read while the caller writes this one."""

        def fetch(page: EdgePage | None) -> asyncio.Task[EdgePage]:
            after = page.entries[-1] if page is not None else None
            return asyncio.create_task(self._graph.list_followers(author, self._batch, after))

        upcoming: asyncio.Task[EdgePage] | None = fetch(None)
        try:
            while upcoming is not None:
                page = await upcoming
                upcoming = fetch(page) if page.has_more and page.entries else None
                if page.entries:
                    yield [edge.user_id for edge in page.entries]
        finally:
            if upcoming is not None and not upcoming.done():
                upcoming.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await upcoming
