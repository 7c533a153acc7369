"""Running many small checks at once without flooding DynamoDB: a bound on calls in flight.

Shared by ``reconcile`` and ``fsck``: both re-read drifted users one by one, and a scan can turn up
thousands of them at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

__all__ = ["CONCURRENCY", "bounded"]

T = TypeVar("T")
CONCURRENCY = 16


async def bounded(calls: Sequence[Callable[[], Awaitable[T]]], limit: int = CONCURRENCY) -> list[T]:
    """Run the calls with at most ``limit`` in flight; results in the calls' order."""
    gate = asyncio.Semaphore(limit)

    async def one(call: Callable[[], Awaitable[T]]) -> T:
        async with gate:
            return await call()

    return list(await asyncio.gather(*(one(c) for c in calls)))
