"""Second looks, taken a moment later without holding up the scan.

A first look at a live system can catch a write between its two halves: a follow committed whose
cache write-through has not landed yet, a counter the consumer is about to move (about a second
behind). So nothing is reported on a first look: each suspicion is queued here and looked at
again ``settle_seconds`` after it was raised, by a few workers, while the scan goes on.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from types import TracebackType

__all__ = ["Confirmer"]

Check = Callable[[], Awaitable[None]]


class Confirmer:
    """``async with Confirmer(settle) as later: later.add(check)``; the block's end waits for every
    check, and the first check that failed is raised there. Checks added before the block starts
    wait for it."""

    def __init__(self, settle_seconds: float, *, workers: int = 8) -> None:
        self._settle = settle_seconds
        self._queue: asyncio.Queue[tuple[float, Check]] = asyncio.Queue()
        self._workers: list[asyncio.Task[None]] = []
        self._count = workers
        self._failure: BaseException | None = None
        self.looked_again = 0

    @property
    def settle_seconds(self) -> float:
        """How long a check waits after it was added (second looks taken later reuse it)."""
        return self._settle

    @property
    def waiting(self) -> int:
        """Checks added and not started yet."""
        return self._queue.qsize()

    def add(self, check: Check) -> None:
        if self._failure is not None:
            raise self._failure
        self._queue.put_nowait((time.monotonic() + self._settle, check))

    async def _work(self) -> None:
        while True:
            due, check = await self._queue.get()
            try:
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                if self._failure is None:
                    await check()
                    self.looked_again += 1
            except Exception as exc:  # kept for the caller; the other checks are skipped
                self._failure = self._failure or exc
            finally:
                self._queue.task_done()

    async def __aenter__(self) -> Confirmer:
        self._workers = [asyncio.create_task(self._work()) for _ in range(self._count)]
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        try:
            if kind is None:
                await self._queue.join()
        finally:
            for worker in self._workers:
                worker.cancel()
            await asyncio.gather(*self._workers, return_exceptions=True)
        if kind is None and self._failure is not None:
            raise self._failure
