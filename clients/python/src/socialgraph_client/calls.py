"""What both transports decide the same way: each call's deadline, metadata and request ID, and
whether (and after how long) a failed attempt is sent again."""

from __future__ import annotations

import logging
import os
import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import grpc

from socialgraph_client.errors import REQUEST_ID_KEY, Cancelled, SocialGraphError
from socialgraph_client.options import Deadlines, Metadata, RetryPolicy, normalize_metadata
from socialgraph_client.rpcs import Rpc

__all__ = ["CallPlan", "Lifecycle", "Planner"]

log = logging.getLogger("socialgraph_client")


@dataclass(slots=True)
class CallPlan:
    """One call: sent with ``metadata`` until it succeeds, fails for good, or ``deadline`` passes."""

    rpc: Rpc[Any, Any]
    metadata: tuple[tuple[str, str], ...]
    request_id: str
    deadline: float | None
    """``time.monotonic()`` by which the call must end; None: no deadline."""
    retry: RetryPolicy | None
    attempts: int = 0
    cause: SocialGraphError | None = None
    """The failure last retried."""
    _delay: float = field(default=0.0)

    def timeout(self) -> float | None:
        """Seconds left for the next attempt (counted as one more attempt)."""
        self.attempts += 1
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())

    def wait_before_retry(self, error: SocialGraphError) -> float | None:
        """Seconds to wait before sending the call again, or None: raise ``error``."""
        policy = self.retry
        if policy is None or (policy.max_attempts is not None and self.attempts >= policy.max_attempts):
            return None
        if error.code is grpc.StatusCode.UNAVAILABLE:
            grown = self._delay * policy.multiplier
            self._delay = min(policy.max_backoff, grown) if self._delay else policy.initial_backoff
            wait = random.uniform(self._delay / 2, self._delay)  # noqa: S311 - jitter, not a secret
        elif (
            error.code is grpc.StatusCode.RESOURCE_EXHAUSTED
            and policy.honour_retry_info
            and error.retry_after is not None
            and error.retry_after <= policy.max_retry_info_wait
        ):
            # At least what the server asked, spread a little so that callers told alike do not return alike.
            wait = max(0.0, error.retry_after) * random.uniform(1.0, 1.1)  # noqa: S311 - jitter, not a secret
        else:
            return None
        if self.deadline is not None and time.monotonic() + wait >= self.deadline:
            return None
        log.info(
            "retrying %s in %.3f s after %s (attempt %d, request %s)",
            self.rpc.name,
            wait,
            error.code.name,
            self.attempts + 1,
            self.request_id,
        )
        self.cause = error
        return wait

    def final(self, error: SocialGraphError) -> SocialGraphError:
        """The error to raise: when the deadline ran out on a retry, the failure that was being
        retried (``UNAVAILABLE``, or ``RESOURCE_EXHAUSTED`` with its ``retry_after``) says more."""
        cause = self.cause
        if error.code is grpc.StatusCode.DEADLINE_EXCEEDED and cause is not None and cause is not error:
            cause.attempts = self.attempts
            return cause
        return error


class Lifecycle:
    """Refuses calls on a closed client, and in a process forked from the one that connected (gRPC
    channels do not survive ``fork()``: a call there would hang)."""

    def __init__(self) -> None:
        self._pid = os.getpid()
        self.closed = False

    def check(self) -> None:
        if self.closed:
            raise Cancelled(grpc.StatusCode.CANCELLED, "the client is closed")
        if os.getpid() != self._pid:
            raise RuntimeError(
                f"this client was connected in process {self._pid}, before a fork; connect in the "
                "process that calls (after the fork: Celery's worker_process_init, gunicorn's post_fork)"
            )


class Planner:
    """Plans each call of one client from its deadlines, retry policy and metadata."""

    def __init__(self, deadlines: Deadlines, retry: RetryPolicy | None, metadata: tuple[tuple[str, str], ...]) -> None:
        self._deadlines = deadlines
        self._retry = retry
        self._metadata = metadata

    def plan(self, rpc: Rpc[Any, Any], timeout: float | None, metadata: Metadata | None) -> CallPlan:
        """``timeout`` (seconds, the whole call) or the kind's default; the client's metadata, then the
        call's (which replaces the client's for the keys it gives, ``authorization`` included); the
        call's ``x-request-id``, or one made up (the same for every attempt)."""
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be above 0 seconds, not {timeout!r}")
        seconds = timeout if timeout is not None else self._deadlines.of(rpc.kind)
        own = normalize_metadata(metadata)
        replaced = {key for key, _ in own}
        pairs = (*(pair for pair in self._metadata if pair[0] not in replaced), *own)
        given = [value for key, value in own if key == REQUEST_ID_KEY]
        request_id = given[-1] if given else uuid.uuid4().hex
        pairs = (*(pair for pair in pairs if pair[0] != REQUEST_ID_KEY), (REQUEST_ID_KEY, request_id))
        deadline = None if seconds is None else time.monotonic() + seconds
        return CallPlan(rpc, pairs, request_id, deadline, self._retry)
