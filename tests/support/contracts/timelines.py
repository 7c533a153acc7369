"""What every implementation of ``TimelineWrites`` and ``TimelineReads`` must do.

``TimelinesContract`` runs against the in-memory fake and the Redis ``TimelineStore``; a subclass
provides ``timelines``: fresh timelines with a cap of 3 entries and 2 recent tweets per author, a
follow kept new for ``NEW_FOLLOW_SECONDS``, and the contract's ``clock`` as their clock.
"""

from __future__ import annotations

from typing import Protocol

import pytest

from graph_service.domain.ports import TimelineReads, TimelineWrites

__all__ = ["NEW_FOLLOW_SECONDS", "RECENT_CAP", "TIMELINE_CAP", "ManualClock", "Timelines", "TimelinesContract"]

TIMELINE_CAP = 3
RECENT_CAP = 2
NEW_FOLLOW_SECONDS = 60.0
BIG = 2**64 - 1


class Timelines(TimelineWrites, TimelineReads, Protocol):
    pass


class ManualClock:
    """Seconds since the epoch, moved by the test."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


class TimelinesContract:
    @pytest.fixture
    def clock(self) -> ManualClock:
        return ManualClock()

    async def test_a_tweet_recorded_after_a_follow_was_noted_names_the_new_follower(self, timelines: Timelines) -> None:
        assert await timelines.record_tweet(5, 11) == []
        assert await timelines.note_follow(5, 70, followed=True) == [11]
        assert await timelines.note_follow(5, 71, followed=True) == [11]
        assert sorted(await timelines.record_tweet(5, 12)) == [70, 71]
        assert await timelines.record_tweet(6, 13) == []  # another author's

    async def test_an_unfollow_forgets_the_new_follower_and_reads_the_recent_tweets(self, timelines: Timelines) -> None:
        await timelines.note_follow(5, 70, followed=True)
        await timelines.record_tweet(5, 11)
        await timelines.record_tweet(5, 12)
        assert await timelines.note_follow(5, 70, followed=False) == [12, 11]
        assert await timelines.note_follow(5, 70, followed=False) == [12, 11]  # a repeat: the same
        assert await timelines.record_tweet(5, 13) == []

    async def test_a_follow_stays_new_for_its_window_only(self, timelines: Timelines, clock: ManualClock) -> None:
        await timelines.note_follow(5, 70, followed=True)
        clock.now += NEW_FOLLOW_SECONDS / 2
        await timelines.note_follow(5, 71, followed=True)
        assert sorted(await timelines.record_tweet(5, 11)) == [70, 71]
        clock.now += NEW_FOLLOW_SECONDS / 2 + 1
        assert await timelines.record_tweet(5, 12) == [71]
        clock.now += NEW_FOLLOW_SECONDS
        assert await timelines.record_tweet(5, 13) == []

    async def test_merge_keeps_each_tweet_once_newest_first(self, timelines: Timelines) -> None:
        assert await timelines.merge(1, [5, 3, 2, 3]) == 3
        assert await timelines.home(1) == [5, 3, 2]
        assert await timelines.merge(1, [5, 2]) == 0
        assert await timelines.home(1) == [5, 3, 2]
        assert await timelines.merge(1, []) == 0

    async def test_a_late_tweet_goes_in_its_place(self, timelines: Timelines) -> None:
        await timelines.merge(1, [10, 2])
        assert await timelines.merge(1, [6]) == 1
        assert await timelines.home(1) == [10, 6, 2]

    async def test_a_timeline_keeps_its_newest_entries_only(self, timelines: Timelines) -> None:
        assert await timelines.merge(1, [1, 2, 3, 4, 5]) == 5
        assert await timelines.home(1) == [5, 4, 3]
        assert await timelines.merge(1, [0]) == 0  # older than a full timeline holds: dropped
        assert await timelines.home(1) == [5, 4, 3]

    async def test_ids_compare_as_64_bit_numbers(self, timelines: Timelines) -> None:
        await timelines.merge(1, [2**63, BIG, 10**18, 9 * 10**17])
        assert await timelines.home(1) == [BIG, 2**63, 10**18]

    async def test_home_reads_a_window_newest_first_after_a_cursor(self, timelines: Timelines) -> None:
        await timelines.merge(1, [9, 7, 4])
        assert await timelines.home(1, 2) == [9, 7]
        assert await timelines.home(1, 5) == [9, 7, 4]
        assert await timelines.home(1, 0) == [9, 7, 4]  # 0: no limit
        assert await timelines.home(1, 0, older_than=9) == [7, 4]
        assert await timelines.home(1, 2, older_than=9) == [7, 4]
        assert await timelines.home(1, older_than=8) == [7, 4]  # a cursor no longer in the list
        assert await timelines.home(1, 1, older_than=7) == [4]
        assert await timelines.home(1, older_than=4) == []
        assert await timelines.home(1, older_than=BIG) == [9, 7, 4]
        assert await timelines.home(2, 5, older_than=3) == []

    async def test_a_window_compares_ids_as_64_bit_numbers(self, timelines: Timelines) -> None:
        await timelines.merge(1, [BIG, 2**63, 10**18])
        assert await timelines.home(1, older_than=BIG) == [2**63, 10**18]
        assert await timelines.home(1, 1, older_than=2**63 + 1) == [2**63]
        assert await timelines.home(1, older_than=10**18 + 1) == [10**18]
        assert await timelines.home(1, older_than=10**18) == []

    async def test_push_puts_one_tweet_into_each_timeline(self, timelines: Timelines) -> None:
        await timelines.merge(2, [50])
        await timelines.push(40, [1, 2, 3])
        await timelines.push(40, [1])
        assert [await timelines.home(u) for u in (1, 2, 3, 4)] == [[40], [50, 40], [40], []]
        await timelines.push(41, [])

    async def test_remove_takes_tweets_out_and_counts_them(self, timelines: Timelines) -> None:
        await timelines.merge(1, [7, 8, 9])
        assert await timelines.remove(1, [8, 6]) == 1
        assert await timelines.home(1) == [9, 7]
        assert await timelines.remove(1, []) == 0
        assert await timelines.remove(2, [7]) == 0

    async def test_recorded_tweets_are_the_authors_recent_ones_with_their_author(self, timelines: Timelines) -> None:
        for tweet_id in (11, 13, 12):
            await timelines.record_tweet(5, tweet_id)
        assert await timelines.recent(5) == [13, 12]
        assert await timelines.recent(6) == []
        assert await timelines.recent_of_many([5, 6]) == {5: [13, 12], 6: []}
        assert await timelines.recent_of_many([]) == {}
        assert await timelines.authors([11, 12, 99]) == {11: 5, 12: 5}

    async def test_authors_are_kept_once_filled(self, timelines: Timelines) -> None:
        assert await timelines.authors([21, 22]) == {}
        await timelines.fill_authors({21: 7, 22: 8})
        await timelines.fill_authors({})
        assert await timelines.authors([22, 21, 23]) == {22: 8, 21: 7}

    async def test_celebrities_are_registered(self, timelines: Timelines) -> None:
        assert not await timelines.is_celebrity(31)
        await timelines.mark_celebrity(31, 20_000)
        await timelines.mark_celebrity(32, 10_000)
        assert await timelines.is_celebrity(31)
        assert await timelines.celebrities() == [32, 31]  # by follower count when marked

    async def test_forgetting_an_account_removes_its_timeline_tweets_and_mark_only(self, timelines: Timelines) -> None:
        await timelines.merge(41, [1, 2])
        await timelines.record_tweet(41, 3)
        await timelines.note_follow(41, 42, followed=True)
        await timelines.mark_celebrity(41, 20_000)
        await timelines.merge(43, [3])
        await timelines.forget_account(41)
        assert (await timelines.home(41), await timelines.recent(41)) == ([], [])
        assert not await timelines.is_celebrity(41)
        assert await timelines.record_tweet(41, 4) == []  # the new follower is forgotten too
        assert await timelines.home(43) == [3]  # what it pushed elsewhere is the readers' to hide
        await timelines.forget_account(41)  # idempotent
