"""Backoff with jitter and the stop-aware pause."""

from __future__ import annotations

import asyncio
import time

import pytest

from graph_service.domain.retry import Backoff, pause, unless_stopped


def test_delays_grow_with_jitter_up_to_the_cap_and_reset() -> None:
    backoff = Backoff(base=0.1, cap=1.0)
    delays = [backoff.next_delay() for _ in range(8)]
    for n, delay in enumerate(delays):
        ceiling = min(1.0, 0.1 * 2**n)
        assert ceiling / 2 <= delay <= ceiling
    assert backoff.failures == 8
    assert len({round(d, 9) for d in [Backoff(0.1, 1.0).next_delay() for _ in range(20)]}) > 1  # jittered
    backoff.reset()
    assert backoff.failures == 0
    assert backoff.next_delay() <= 0.1


def test_delay_by_attempt_with_full_jitter_counts_nothing() -> None:
    """``floor=0.0`` draws each wait from nothing to the delay (DynamoDB's retries), by attempt."""
    backoff = Backoff(base=0.01, cap=0.5, floor=0.0)
    for attempt in range(8):
        assert 0 <= backoff.delay(attempt) <= min(0.5, 0.01 * 2**attempt)
    assert backoff.failures == 0
    assert min(backoff.delay(0) for _ in range(200)) < 0.005  # below the default floor of one half


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="base <= cap"):
        Backoff(base=0, cap=1)
    with pytest.raises(ValueError, match="base <= cap"):
        Backoff(base=2, cap=1)
    with pytest.raises(ValueError, match="floor"):
        Backoff(floor=1.5)


async def test_pause_returns_early_when_stopped() -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(0.05, stop.set)
    started = time.monotonic()
    assert await pause(30, stop) is True
    assert time.monotonic() - started < 5
    assert await pause(30, stop) is True  # already stopped: no wait at all


async def test_pause_sleeps_the_delay_without_a_stop() -> None:
    assert await pause(0.01, asyncio.Event()) is False
    assert await pause(0.01) is False


async def test_unless_stopped_gives_the_work_or_cuts_it_short() -> None:
    stop = asyncio.Event()
    done = await unless_stopped(asyncio.sleep(0, "answer"), stop)
    assert done.result() == "answer"
    slow = await unless_stopped(asyncio.sleep(30), stop, timeout=0.01)
    assert slow.cancelled()  # the time ran out: cancelled and ended
    asyncio.get_running_loop().call_later(0.02, stop.set)
    started = time.monotonic()
    stopped = await unless_stopped(asyncio.sleep(30), stop)
    assert stopped.cancelled()
    assert time.monotonic() - started < 5
