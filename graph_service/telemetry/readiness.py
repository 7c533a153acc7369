"""What ``/readyz`` of a consumer asks: has it started, and has it shown progress recently?"""

from __future__ import annotations

import time

__all__ = ["Heartbeat"]


class Heartbeat:
    """When a consumer last showed ``evidence`` that it works: ``beat()`` each time it does.

    Ready while running and the last beat is at most ``stale_after`` seconds old. What counts as
    evidence is the consumer's to choose, and must not be a mere attempt: a stream consumer beats
    when a batch is handled or a read finds it caught up (not when a read returns records that its
    handler then fails on), the fanout worker when the broker answered. A consumer busy on one long
    batch does not beat meanwhile, so ``stale_after`` must exceed the longest batch.
    """

    def __init__(self, what: str, *, stale_after: float = 30.0, evidence: str = "successful read") -> None:
        if stale_after <= 0:
            raise ValueError(f"stale_after must be above 0, not {stale_after}")
        self.what = what
        self.stale_after = stale_after
        self._evidence = evidence
        self._last: float | None = None
        self._running = False

    def start(self) -> None:
        self._running = True

    def stop(self) -> None:
        self._running = False

    def beat(self) -> None:
        self._last = time.monotonic()

    def older_than(self, seconds: float) -> bool:
        """No beat yet, or the last one is more than ``seconds`` old."""
        return self._last is None or time.monotonic() - self._last > seconds

    def problem(self) -> str | None:
        """None when ready, else why not (the ``/readyz`` answer's body)."""
        if not self._running:
            return f"{self.what}: not running"
        if self._last is None:
            return f"{self.what}: no {self._evidence} yet"
        age = time.monotonic() - self._last
        if age > self.stale_after:
            return f"{self.what}: last {self._evidence} {age:.0f}s ago"
        return None
