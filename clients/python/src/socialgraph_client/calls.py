"""What both transports decide the same way: each call's deadline, metadata (token, trace context and
request ID among it) and retry policy, each attempt's timeout, and whether (and after how long) a
failed attempt is sent again."""

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
from socialgraph_client.options import (
    USE_CLIENT_DEFAULT,
    Deadlines,
    Metadata,
    RetryPolicy,
    UseClientDefault,
    normalize_metadata,
)
from socialgraph_client.rpcs import Rpc
from socialgraph_client.tokens import AUTHORIZATION, BearerToken
from socialgraph_client.tracing import Propagator

__all__ = ["CallPlan", "Lifecycle", "Planner", "Retry"]

Retry = RetryPolicy | None | UseClientDefault
"""A method's ``retry=``: a policy for this call, None for no retries, or the client's own policy."""

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
    credentials: grpc.CallCredentials | None = None
    """The token's call credentials (over TLS); None: none, or the token is in ``metadata``."""
    attempts: int = 0
    cause: SocialGraphError | None = None
    """The failure last retried."""
    _delay: float = field(default=0.0)
    _capped: bool = field(default=False)
    """The last attempt's timeout was its own ``attempt_timeout``, shorter than the time left."""

    def left(self) -> float | None:
        """Seconds left of the whole call; None: no deadline."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())

    def timeout(self) -> float | None:
        """Seconds for the next attempt (counted as one more attempt): the time left, or the policy's
        ``attempt_timeout`` when that is shorter."""
        self.attempts += 1
        left = self.left()
        cap = None if self.retry is None else self.retry.attempt_timeout
        self._capped = cap is not None and (left is None or cap < left)
        return cap if self._capped else left

    def wait_before_retry(self, error: SocialGraphError) -> float | None:
        """Seconds to wait before sending the call again, or None: raise ``error``."""
        policy = self.retry
        if policy is None or (policy.max_attempts is not None and self.attempts >= policy.max_attempts):
            return None
        code = error.code()
        if code is grpc.StatusCode.UNAVAILABLE or (code is grpc.StatusCode.DEADLINE_EXCEEDED and self._timed_out()):
            grown = self._delay * policy.multiplier
            self._delay = min(policy.max_backoff, grown) if self._delay else policy.initial_backoff
            wait = random.uniform(self._delay / 2, self._delay)  # noqa: S311 - jitter, not a secret
        elif (
            code is grpc.StatusCode.RESOURCE_EXHAUSTED
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
            code.name,
            self.attempts + 1,
            self.request_id,
        )
        self.cause = error
        return wait

    def _timed_out(self) -> bool:
        """The last attempt ran out of its own ``attempt_timeout`` while the call still has time (a
        replica that hangs: another attempt may reach another one)."""
        return self._capped and (self.deadline is None or time.monotonic() < self.deadline)

    def final(self, error: SocialGraphError) -> SocialGraphError:
        """The error to raise: when the deadline ran out on a retry, the failure that was being
        retried (``UNAVAILABLE``, or ``RESOURCE_EXHAUSTED`` with its ``retry_after``) says more."""
        cause = self.cause
        if error.code() is grpc.StatusCode.DEADLINE_EXCEEDED and cause is not None and cause is not error:
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
    """Plans each call of one client from its deadlines, retry policy, metadata, token and tracing."""

    def __init__(
        self,
        deadlines: Deadlines,
        retry: RetryPolicy | None,
        metadata: tuple[tuple[str, str], ...],
        *,
        token: BearerToken | None = None,
        tracing: Propagator | None = None,
    ) -> None:
        self._deadlines = deadlines
        self._retry = retry
        self._metadata = metadata
        self._token = token
        self._tracing = tracing

    def plan(
        self, rpc: Rpc[Any, Any], timeout: float | None, metadata: Metadata | None, retry: Retry = USE_CLIENT_DEFAULT
    ) -> CallPlan:
        """``timeout`` (seconds, the whole call) or the kind's default; ``retry`` or the client's policy.

        Metadata, later entries replacing earlier ones of the same key: the client's, the token's,
        the call's (a call's own ``authorization`` is sent instead of the token, which is then not
        read), then the caller's trace context (unless the call gave its own), and the call's
        ``x-request-id`` or one made up (the same for every attempt)."""
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be above 0 seconds, not {timeout!r}")
        if isinstance(retry, UseClientDefault):
            policy = self._retry
        elif retry is None or isinstance(retry, RetryPolicy):
            policy = retry
        else:
            raise ValueError(f"retry must be a RetryPolicy, None (no retries) or USE_CLIENT_DEFAULT, not {retry!r}")
        seconds = timeout if timeout is not None else self._deadlines.of(rpc.kind)
        own = normalize_metadata(metadata)
        given = {key for key, _ in own}
        pairs = self._metadata
        credentials = None
        if self._token is not None and AUTHORIZATION not in given:
            carried, credentials = self._token.for_call()
            pairs = (*(pair for pair in pairs if pair[0] != AUTHORIZATION), *carried)
        pairs = (*(pair for pair in pairs if pair[0] not in given), *own)
        if self._tracing is not None:
            pairs = (*pairs, *_trace_context(self._tracing, {key for key, _ in pairs}))
        ids = [value for key, value in own if key == REQUEST_ID_KEY]
        request_id = ids[-1] if ids else uuid.uuid4().hex
        pairs = (*(pair for pair in pairs if pair[0] != REQUEST_ID_KEY), (REQUEST_ID_KEY, request_id))
        deadline = None if seconds is None else time.monotonic() + seconds
        return CallPlan(rpc, pairs, request_id, deadline, policy, credentials)


def _trace_context(propagator: Propagator, present: set[str]) -> tuple[tuple[str, str], ...]:
    """What ``propagator`` writes for the current context, but for keys already given."""
    carrier: dict[str, str] = {}
    propagator(carrier)
    if not carrier:
        return ()  # no span current: nothing to send, nothing to check
    return tuple(pair for pair in normalize_metadata(carrier) if pair[0] not in present)
