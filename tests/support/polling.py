"""Real servers for the tests, on free ports, torn down after; plus helpers to poll with a deadline."""

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
    """Poll ``probe`` until ``accept`` holds or the deadline passes (then fail with the last value)."""
    deadline = time.monotonic() + timeout
    while True:
        value = await probe()
        if accept(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s; last value: {value!r}")
        await asyncio.sleep(interval)


def wait_until(check: Callable[[], bool], *, timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met within {timeout}s")
        time.sleep(0.05)
