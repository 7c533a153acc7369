"""Tweet IDs: ``milliseconds since 2020-01-01 << 22 | worker << 12 | sequence`` (snowflake layout).

Ordering by ID is ordering by time, to the millisecond, across every poster.
"""

from __future__ import annotations

import secrets
import threading
import time

__all__ = ["TweetIdGenerator", "created_at_us"]

EPOCH_MS = 1_577_836_800_000  # 2020-01-01T00:00:00Z
WORKER_BITS = 10
SEQUENCE_BITS = 12


def created_at_us(tweet_id: int) -> int:
    """When the tweet was posted (to the millisecond), from its ID alone."""
    return ((tweet_id >> (WORKER_BITS + SEQUENCE_BITS)) + EPOCH_MS) * 1000


class TweetIdGenerator:
    """Snowflake IDs: unique per worker number, increasing within one generator."""

    def __init__(self, worker: int | None = None) -> None:
        self._worker = secrets.randbelow(1 << WORKER_BITS) if worker is None else worker
        if not 0 <= self._worker < 1 << WORKER_BITS:
            raise ValueError(f"worker must be in [0, {1 << WORKER_BITS})")
        self._lock = threading.Lock()
        self._last_ms = -1
        self._sequence = 0

    def next_id(self) -> int:
        with self._lock:
            now = time.time_ns() // 1_000_000 - EPOCH_MS
            if now <= self._last_ms:  # same millisecond (or the clock stepped back): next sequence
                now = self._last_ms
                self._sequence = (self._sequence + 1) & ((1 << SEQUENCE_BITS) - 1)
                if self._sequence == 0:
                    now += 1  # this millisecond is used up: borrow the next one
            else:
                self._sequence = 0
            self._last_ms = now
            return (now << (WORKER_BITS + SEQUENCE_BITS)) | (self._worker << SEQUENCE_BITS) | self._sequence
