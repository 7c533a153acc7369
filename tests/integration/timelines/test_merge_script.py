"""The timeline Lua scripts on a real redis-server: newest first, each ID once, capped, 64-bit exact."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graph_service.timelines.scripts import MERGE_IDS, REMOVE_IDS

KEY = "home_timeline:{1}"
BIG = 2**63  # IDs this large differ in digits a Lua number (a double) cannot hold


class Timeline:
    def __init__(self, client: redis.Redis) -> None:
        self._client = client
        self._merge = client.register_script(MERGE_IDS)
        self._remove = client.register_script(REMOVE_IDS)

    def merge(self, cap: int, *ids: int) -> int:
        return int(self._merge(keys=[KEY], args=[cap, *ids]))

    def remove(self, *ids: int) -> int:
        return int(self._remove(keys=[KEY], args=list(ids)))

    def ids(self) -> list[int]:
        return [int(v) for v in self._client.lrange(KEY, 0, -1)]

    def clear(self) -> None:
        self._client.delete(KEY)


@pytest.fixture
def timeline(redis_url: str) -> Iterator[Timeline]:
    client = redis.Redis.from_url(redis_url)
    yield Timeline(client)
    client.close()


def test_ids_in_any_order_end_newest_first(timeline: Timeline) -> None:
    assert timeline.merge(10, 5, 1, 9, 3) == 4
    assert timeline.merge(10, 7) == 1  # lands in its place
    assert timeline.merge(10, 2) == 1
    assert timeline.ids() == [9, 7, 5, 3, 2, 1]


def test_an_id_already_present_changes_nothing(timeline: Timeline) -> None:
    timeline.merge(10, 30, 20, 10)
    for again in (30, 20, 10):
        assert timeline.merge(10, again) == 0
    assert timeline.merge(10, 20, 20, 20) == 0
    assert timeline.ids() == [30, 20, 10]


def test_one_batch_with_repeats_holds_each_id_once(timeline: Timeline) -> None:
    assert timeline.merge(10, 4, 4, 6, 4, 6, 5) == 3
    assert timeline.ids() == [6, 5, 4]


def test_the_list_is_capped_to_the_newest(timeline: Timeline) -> None:
    timeline.merge(3, 1, 2, 3, 4, 5)
    assert timeline.ids() == [5, 4, 3]
    assert timeline.merge(3, 2) == 0  # older than a full list: dropped
    assert timeline.ids() == [5, 4, 3]
    timeline.merge(3, 6)
    assert timeline.ids() == [6, 5, 4]
    timeline.merge(3, 5)  # present: nothing
    timeline.merge(3, 3)  # trimmed before, still too old: dropped
    assert timeline.ids() == [6, 5, 4]


def test_ids_of_different_lengths_order_by_value_not_by_text(timeline: Timeline) -> None:
    timeline.merge(10, 9, 10, 100, 99, 1_000_000_000_000)
    assert timeline.ids() == [1_000_000_000_000, 100, 99, 10, 9]


def test_64_bit_ids_one_apart_are_told_apart(timeline: Timeline) -> None:
    ids = [BIG + 3, BIG + 1, BIG + 2, 2**64 - 1, 2**64 - 2, BIG + 1]
    assert timeline.merge(10, *ids) == 5
    assert timeline.ids() == [2**64 - 1, 2**64 - 2, BIG + 3, BIG + 2, BIG + 1]
    assert timeline.merge(10, BIG + 2) == 0


def test_remove_takes_out_only_the_ids_named(timeline: Timeline) -> None:
    timeline.merge(10, BIG + 1, BIG + 2, BIG + 3)
    assert timeline.remove(BIG + 2, 12345) == 1
    assert timeline.ids() == [BIG + 3, BIG + 1]
    assert timeline.remove(BIG + 2) == 0
    assert timeline.merge(10, BIG + 2) == 1  # a removed ID can come back in its place
    assert timeline.ids() == [BIG + 3, BIG + 2, BIG + 1]


tweet_ids = st.one_of(
    st.integers(min_value=1, max_value=40),
    st.integers(min_value=BIG, max_value=BIG + 40),
    st.integers(min_value=1, max_value=2**64 - 1),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cap=st.integers(min_value=1, max_value=8), batches=st.lists(st.lists(tweet_ids, max_size=6), max_size=8))
def test_after_any_merges_the_list_is_the_newest_cap_ids_seen(
    timeline: Timeline, cap: int, batches: list[list[int]]
) -> None:
    """Redelivered, out-of-order and concurrent-looking batches: always the top `cap` distinct IDs."""
    timeline.clear()
    seen: set[int] = set()
    for batch in batches:
        timeline.merge(cap, *batch)
        seen.update(batch)
        assert timeline.ids() == sorted(seen, reverse=True)[:cap]
