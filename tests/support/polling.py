"""Waiting with a deadline for what the tests cannot be told directly (a server serving, a consumer
caught up, a cache settled): ``eventually`` awaits an async probe, ``wait_until`` calls a plain
check. Either fails with an ``AssertionError`` that says what never happened."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def eventually(
    probe: Callable[[], Awaitable[T]],
    accept: Callable[[T], bool],
    *,
    timeout: float = 20.0,  # noqa: ASYNC109 - a polling deadline, not a cancellation timeout
    interval: float = 0.05,
) -> T:
    """Await ``probe()`` every ``interval`` seconds until ``accept`` takes its value, and return that
    value; once ``timeout`` seconds have passed, fail with the last value seen. The probe runs at
    least once; an exception it raises is not retried but ends the wait."""
    deadline = time.monotonic() + timeout
    while True:
        value = await probe()
        if accept(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s; last value: {value!r}")
        await asyncio.sleep(interval)


def wait_until(check: Callable[[], bool], *, timeout: float = 20.0, what: str = "condition") -> None:
    """Call ``check()`` every 50 ms until it is true; once ``timeout`` seconds have passed, fail
    naming ``what``. It blocks the thread: for synchronous tests and fixtures (a child process
    answering, a file written), not inside an event loop."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met within {timeout}s")
        time.sleep(0.05)
