"""When the call a read serves arrived in this process: a near-cache read fence written after that
moment orders every write acknowledged before the caller sent the call (``cache/near_cache.py``).
The reads of one call may therefore share a fence, and a read need not wait at all when a fence
written after its call arrived has been answered already.

The API's interceptor marks each call as it starts (later than the call truly arrived, which is on
the safe side: a fence written after the mark is written after the arrival too). A read outside a
marked call (a consumer, a job) has no mark and waits for a fence of its own, written after it asks.
"""

from __future__ import annotations

import time
from contextvars import ContextVar

__all__ = ["arrived", "mark"]

_ARRIVED: ContextVar[float | None] = ContextVar("sg_call_arrived", default=None)


def mark() -> None:
    """This task's call arrived now (``time.monotonic()``, the event loop's clock)."""
    _ARRIVED.set(time.monotonic())


def arrived() -> float | None:
    """When this task's call arrived, or None outside a marked call."""
    return _ARRIVED.get()
