"""What ``/readyz`` of a consumer asks: has it started, and did its last read succeed recently?"""

from __future__ import annotations

import time

__all__ = ["Heartbeat"]


class Heartbeat:
    """When a consumer's source (a stream, Kafka) last answered it: ``beat()`` after each good read.

    Ready while running and the last beat is at most ``stale_after`` seconds old. A consumer
    busy on one long batch beats per read, so ``stale_after`` must exceed the longest batch.
    """

    def __init__(self, what: str, *, stale_after: float = 30.0) -> None:
        self.what = what
        self._stale_after = stale_after
        self._last: float | None = None
        self._running = False

    def start(self) -> None:
        self._running = True

    def stop(self) -> None:
        self._running = False

    def beat(self) -> None:
        self._last = time.monotonic()

    def problem(self) -> str | None:
        """None when ready, else why not (the ``/readyz`` answer's body)."""
        if not self._running:
            return f"{self.what}: not running"
        if self._last is None:
            return f"{self.what}: no successful read yet"
        age = time.monotonic() - self._last
        if age > self._stale_after:
            return f"{self.what}: last successful read {age:.0f}s ago"
        return None
