"""Backoff with jitter for every retry loop of the project, and a wait that a stop cuts short.

A loop that retries (a consumer waiting for Redis, DynamoDB or the broker) takes its delays from one
``Backoff``: exponential, capped, with jitter (each wait drawn between half and all of the delay,
or between nothing and all of it) so that several processes that failed together do not retry
together; ``reset()`` after a success, or ``delay(attempt)`` for a loop that counts its attempts.
``pause(delay, stop)`` sleeps unless ``stop`` is set first, so a stop request never waits for a
backoff to run out; ``unless_stopped`` does the same for any other wait (a poll, a probe).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["Backoff", "pause", "unless_stopped"]

T = TypeVar("T")


class Backoff:
    """Delays of ``base * 2**n`` seconds, at most ``cap``, each drawn uniformly from
    ``[delay * floor, delay]``: with the default ``floor`` of one half, jitter that still grows (a
    retry never comes at once); with ``floor=0.0``, full jitter (the short DynamoDB retries of
    ``dynamodb.operations.backoff``)."""

    def __init__(self, base: float = 0.1, cap: float = 5.0, *, floor: float = 0.5) -> None:
        if base <= 0 or cap < base:
            raise ValueError("need 0 < base <= cap")
        if not 0 <= floor <= 1:
            raise ValueError("need 0 <= floor <= 1")
        self._base = base
        self._cap = cap
        self._floor = floor
        self.failures = 0
        """Failures since the last ``reset()``."""

    def delay(self, attempt: int) -> float:
        """The wait after failed attempt number ``attempt`` (0 the first), for a loop that counts
        its own attempts; counts nothing."""
        ceiling: float = min(self._cap, self._base * 2.0 ** min(attempt, 32))
        return ceiling * (self._floor + random.random() * (1 - self._floor))  # noqa: S311 - jitter, not crypto

    def next_delay(self) -> float:
        """The wait before the next attempt; counts one more failure."""
        delay = self.delay(self.failures)
        self.failures += 1
        return delay

    def reset(self) -> None:
        self.failures = 0


async def pause(delay: float, stop: asyncio.Event | None = None) -> bool:
    """Sleep ``delay`` seconds, or less if ``stop`` is set meanwhile; True when stopped."""
    if stop is None:
        await asyncio.sleep(delay)
        return False
    if stop.is_set():
        return True
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=delay)
    return stop.is_set()


async def unless_stopped(
    work: Awaitable[T],
    stop: asyncio.Event,
    *,
    timeout: float | None = None,  # noqa: ASYNC109 - a limit on the wait it runs, not a cancellation
) -> asyncio.Future[T]:
    """Wait for ``work`` until it ends, ``stop`` is set or ``timeout`` seconds pass; returns its
    future, cancelled (and ended) if it had not ended by then."""
    task = asyncio.ensure_future(work)
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait([task, stopped], timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    return task
