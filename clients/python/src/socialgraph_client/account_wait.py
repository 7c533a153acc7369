"""What ``wait_for_account`` decides, the same for both clients: how long each poll may take, when a
job has finished, how long to pause between polls, and the error when the time is up.

The loop itself is in ``aio.py`` (and so, generated, in ``sync.py``): it is the only part that awaits.
"""

from __future__ import annotations

import math
import time

import grpc

from socialgraph_client.errors import DeadlineExceeded
from socialgraph_client.values import AccountStatus

__all__ = ["AccountWait"]


class AccountWait:
    """One wait for an account's job: a deadline (``timeout`` seconds from now, or none) and the last
    status seen."""

    def __init__(self, user_id: int, timeout: float | None, poll_interval: float) -> None:
        if timeout is not None and not (timeout > 0 and math.isfinite(timeout)):
            raise ValueError(f"timeout must be above 0 seconds, or None, not {timeout!r}")
        if not (poll_interval >= 0 and math.isfinite(poll_interval)):
            raise ValueError(f"poll_interval must be at least 0 seconds, not {poll_interval!r}")
        self.user_id = user_id
        self.timeout = timeout
        self.poll_interval = poll_interval
        self.deadline = None if timeout is None else time.monotonic() + timeout
        """``time.monotonic()`` by which the wait ends; None: no deadline."""
        self.last: AccountStatus | None = None
        """The status of the last poll answered."""

    def poll_timeout(self) -> float | None:
        """The ``timeout=`` of the next poll: what is left of the wait (so that a server that does not
        answer cannot hold the wait past its deadline), or None: the read deadline of the client."""
        if self.deadline is None:
            return None
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self.expired()
        return left

    def finished(self, status: AccountStatus) -> bool:
        """True once no job runs: the state the wait returns."""
        self.last = status
        return not status.job_running

    def pause(self) -> float:
        """Seconds to sleep before the next poll: ``poll_interval``, never past the deadline."""
        if self.deadline is None:
            return self.poll_interval
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self.expired()
        return min(self.poll_interval, left)

    def over(self) -> bool:
        """The deadline has passed (so a poll that ran out of time ran out of the wait's time)."""
        return self.deadline is not None and time.monotonic() >= self.deadline

    def expired(self) -> DeadlineExceeded:
        """``DeadlineExceeded`` naming the account, the time waited and the last state seen."""
        if self.last is None:
            seen = "no answer to GetAccountState"
        else:
            done, total = self.last.edges_done, self.last.edges_total
            seen = f"still {self.last.state.value} ({done} of {total} edges done)"
        return DeadlineExceeded(
            grpc.StatusCode.DEADLINE_EXCEEDED,
            f"wait_for_account({self.user_id}) gave up after {self.timeout} s: {seen}",
        )
