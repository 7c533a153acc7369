"""Rate-limited failure log lines: a loop that fails 20 times a second writes one line per interval.

``FailureLog.failure(event, kind, **fields)`` writes the first failure of a kind at once, then at most
one line per ``interval`` seconds for that kind, carrying ``count``: how many failures of the kind
happened since the previous line (this one included). Kinds are independent: a Redis outage does not
hide a broker outage. ``recovered(kind)`` writes one line when a kind that failed works again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["FailureLog"]


@dataclass
class _Kind:
    logged_at: float
    pending: int = 0
    """Failures since the last line written."""
    total: int = 0


class FailureLog:
    def __init__(self, logger: Any, *, interval: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._log = logger
        self._interval = interval
        self._clock = clock
        self._kinds: dict[str, _Kind] = {}

    def failure(self, event: str, kind: str, **fields: Any) -> bool:
        """Count one failure of ``kind``; True when a line was written for it."""
        now = self._clock()
        state = self._kinds.get(kind)
        if state is None:
            state = self._kinds[kind] = _Kind(logged_at=now - self._interval)
        state.pending += 1
        state.total += 1
        if now - state.logged_at < self._interval:
            return False
        self._log.warning(event, kind=kind, count=state.pending, total=state.total, **fields)
        state.logged_at = now
        state.pending = 0
        return True

    def recovered(self, event: str, kind: str, **fields: Any) -> None:
        """A kind that failed works again: one line with the failures since the last line, then forget it."""
        state = self._kinds.pop(kind, None)
        if state is not None:
            self._log.info(event, kind=kind, count=state.pending, total=state.total, **fields)
