"""Snowflake tweet IDs: strictly increasing per generator, unique across workers, time-ordered."""

from __future__ import annotations

import itertools
import threading
import time
from types import SimpleNamespace

import pytest

from graph_service.domain import tweet_ids
from graph_service.domain.tweet_ids import TweetIdGenerator, created_at_us

SEQUENCE_PER_MS = 4096
WORKERS = 1024
NOW_NS = 1_750_000_000_123_000_000  # a fixed instant (2025), to a whole millisecond


class FakeClock:
    """Stands in for the ``time`` module of graph_service.domain.tweet_ids: a clock the test moves by hand."""

    def __init__(self, now_ns: int = NOW_NS) -> None:
        self.now_ns = now_ns

    def time_ns(self) -> int:
        return self.now_ns


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(tweet_ids, "time", SimpleNamespace(time_ns=fake.time_ns))
    return fake


def worker_of(tweet_id: int) -> int:
    return (tweet_id >> 12) & (WORKERS - 1)


def strictly_increasing(values: list[int]) -> bool:
    return all(a < b for a, b in itertools.pairwise(values))


def test_ids_strictly_increase_over_many_calls_on_the_real_clock() -> None:
    """Thousands of back-to-back calls (many in one millisecond) never repeat or go backwards."""
    generator = TweetIdGenerator(worker=7)
    ids = [generator.next_id() for _ in range(20_000)]
    assert strictly_increasing(ids)
    assert all(0 < i < 2**63 for i in ids)  # unsigned 64-bit, > 0 (and fits a signed long for decades)
    assert {worker_of(i) for i in ids} == {7}


def test_ids_within_one_millisecond_increase_and_carry_the_same_time(clock: FakeClock) -> None:
    """Calls in one millisecond get consecutive sequence numbers under the same timestamp."""
    generator = TweetIdGenerator(worker=3)
    ids = [generator.next_id() for _ in range(100)]
    assert strictly_increasing(ids)
    assert {created_at_us(i) for i in ids} == {NOW_NS // 1000}


def test_more_than_4096_ids_in_one_millisecond_borrow_the_next_millisecond(clock: FakeClock) -> None:
    """The 12-bit sequence runs out after 4096 IDs; the generator moves on to the next millisecond
    instead of wrapping around into IDs it has already given out."""
    generator = TweetIdGenerator(worker=5)
    ids = [generator.next_id() for _ in range(3 * SEQUENCE_PER_MS + 10)]
    assert strictly_increasing(ids)
    assert len(set(ids)) == len(ids)
    assert created_at_us(ids[SEQUENCE_PER_MS - 1]) == NOW_NS // 1000
    assert created_at_us(ids[SEQUENCE_PER_MS]) == NOW_NS // 1000 + 1000
    # the real clock catching up to the borrowed millisecond does not reuse its sequence numbers
    clock.now_ns += 1_000_000
    later = [generator.next_id() for _ in range(10)]
    assert strictly_increasing(ids + later)


def test_ids_keep_increasing_when_the_clock_steps_back(clock: FakeClock) -> None:
    generator = TweetIdGenerator(worker=9)
    first = generator.next_id()
    clock.now_ns -= 5_000_000  # NTP moved the clock 5 ms back
    after = [generator.next_id() for _ in range(10)]
    assert strictly_increasing([first, *after])


def test_different_workers_never_collide_in_the_same_millisecond(clock: FakeClock) -> None:
    """Every worker number, a full millisecond's sequence (and a borrowed one) each: no ID shared."""
    seen: set[int] = set()
    total = 0
    for worker in (0, 1, 2, 511, 512, WORKERS - 1):
        generator = TweetIdGenerator(worker=worker)
        ids = [generator.next_id() for _ in range(SEQUENCE_PER_MS + 50)]
        assert {worker_of(i) for i in ids} == {worker}
        seen.update(ids)
        total += len(ids)
    assert len(seen) == total
    one_ms = [TweetIdGenerator(worker=w).next_id() for w in range(WORKERS)]
    assert len(set(one_ms)) == WORKERS


def test_ids_are_unique_when_drawn_from_many_threads() -> None:
    generator = TweetIdGenerator(worker=11)
    drawn: list[list[int]] = [[] for _ in range(4)]

    def draw(into: list[int]) -> None:
        into.extend(generator.next_id() for _ in range(5_000))

    threads = [threading.Thread(target=draw, args=(part,)) for part in drawn]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    everything = [i for part in drawn for i in part]
    assert len(set(everything)) == len(everything)
    assert all(strictly_increasing(part) for part in drawn)


def test_created_at_is_the_millisecond_of_generation() -> None:
    """created_at_us reads the posting time back from the ID alone (to the millisecond)."""
    generator = TweetIdGenerator()
    before_us = time.time_ns() // 1000
    tweet_id = generator.next_id()
    after_us = time.time_ns() // 1000
    assert before_us // 1000 * 1000 <= created_at_us(tweet_id) <= after_us
    assert created_at_us(tweet_id) % 1000 == 0


def test_ids_order_by_time() -> None:
    """An ID drawn a millisecond later by any worker is larger than an earlier one."""
    early = TweetIdGenerator(worker=WORKERS - 1).next_id()
    clock_ms = time.time_ns() // 1_000_000
    while time.time_ns() // 1_000_000 <= clock_ms + 1:  # wait past the next millisecond boundary
        pass
    late = TweetIdGenerator(worker=0).next_id()
    assert late > early
    assert created_at_us(late) > created_at_us(early)


@pytest.mark.parametrize("worker", [-1, WORKERS, WORKERS + 1, 10**6])
def test_an_invalid_worker_number_is_refused(worker: int) -> None:
    with pytest.raises(ValueError, match="worker"):
        TweetIdGenerator(worker=worker)


@pytest.mark.parametrize("worker", [0, WORKERS - 1, None])
def test_the_edge_worker_numbers_and_a_random_one_are_accepted(worker: int | None) -> None:
    tweet_id = TweetIdGenerator(worker=worker).next_id()
    assert tweet_id > 0
    if worker is not None:
        assert worker_of(tweet_id) == worker
