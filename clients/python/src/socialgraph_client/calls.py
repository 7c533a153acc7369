"""What both transports decide the same way: each call's deadline, metadata (token, trace context and
request ID among it) and retry policy, each attempt's timeout, whether (and after how long) a
failed attempt is sent again, and which error the call raises in the end."""

from __future__ import annotations

import logging
import os
import random
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any

import grpc

from socialgraph_client.errors import REQUEST_ID_KEY, Cancelled, DeadlineExceeded, SocialGraphError
from socialgraph_client.options import (
    USE_CLIENT_DEFAULT,
    Deadlines,
    Metadata,
    RetryPolicy,
    UseClientDefault,
    normalize_metadata,
)
from socialgraph_client.rpcs import Kind, Rpc
from socialgraph_client.tokens import AUTHORIZATION, BearerToken
from socialgraph_client.tracing import Propagator

__all__ = ["CallPlan", "Lifecycle", "Planner", "Retry"]

Retry = RetryPolicy | None | UseClientDefault
"""A method's ``retry=``: a policy for this call, None for no retries, or the client's own policy."""

log = logging.getLogger("socialgraph_client")

NO_ANSWER = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
"""The codes of an attempt that got no answer: the server may not have seen it, or may not have finished."""

TRACE_WARNING_INTERVAL = 300.0
"""Seconds between two log lines about a trace context that could not be sent."""


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
    timed_out: bool = False
    """An attempt ran out of time (its own ``attempt_timeout`` or the call's deadline): the server may
    have carried it out."""
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
        """Seconds to wait before sending the call again after the failed attempt ``error``, or None:
        raise ``final(error)``."""
        code = error.code()
        if code is grpc.StatusCode.DEADLINE_EXCEEDED:
            self.timed_out = True
        policy = self.retry
        if policy is None or (policy.max_attempts is not None and self.attempts >= policy.max_attempts):
            return None
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
        return wait

    def _timed_out(self) -> bool:
        """The last attempt ran out of its own ``attempt_timeout`` while the call still has time (a
        replica that hangs: another attempt may reach another one)."""
        return self._capped and (self.deadline is None or time.monotonic() < self.deadline)

    def final(self, error: SocialGraphError) -> SocialGraphError:
        """The error the call raises, ``error`` being its last attempt's. When an attempt ran out of
        time (``timed_out``) and the last one got no answer either (``UNAVAILABLE``), it is
        ``DeadlineExceeded``, as for a call whose only attempt ran out of time: that is the error
        that says a write may have been carried out. A definite answer of the last attempt (any
        other code) is raised as it is."""
        error.attempts = self.attempts
        code = error.code()
        if not self.timed_out or code not in NO_ANSWER or code is grpc.StatusCode.DEADLINE_EXCEEDED:
            return error
        return DeadlineExceeded(
            grpc.StatusCode.DEADLINE_EXCEEDED,
            f"an attempt ran out of time, and the last of {self.attempts} got no answer ({code.name}: "
            f"{error.message}); the call may have been carried out",
            request_id=error.request_id,
            attempts=self.attempts,
            trailing_metadata=error.trailing_metadata(),
            initial_metadata=error.initial_metadata(),
        )


class Lifecycle:
    """Refuses calls on a closed client, and in a process forked from the one that connected (gRPC
    channels do not survive ``fork()``: a call there would hang)."""

    def __init__(self) -> None:
        self._pid = os.getpid()
        self.closed = False

    def check(self, plan: CallPlan | None = None) -> None:
        """Raise ``Cancelled`` on a closed client (naming ``plan``'s request and attempts so far),
        ``RuntimeError`` after a fork; else nothing."""
        if self.closed:
            raise Cancelled(
                grpc.StatusCode.CANCELLED,
                "the client is closed",
                request_id="" if plan is None else plan.request_id,
                attempts=0 if plan is None else plan.attempts,
            )
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
        self._retry_unbounded = (
            None if retry is None or retry.attempt_timeout is None else replace(retry, attempt_timeout=None)
        )
        """The client's policy for the calls its ``attempt_timeout`` does not bound (writes, heavy reads)."""
        self._metadata = metadata
        self._token = token
        self._tracing = tracing
        self._trace_warning = _RateLimitedWarning(TRACE_WARNING_INTERVAL)

    def plan(
        self, rpc: Rpc[Any, Any], timeout: float | None, metadata: Metadata | None, retry: Retry = USE_CLIENT_DEFAULT
    ) -> CallPlan:
        """``timeout`` (seconds, the whole call) or the kind's default; ``retry`` or the client's policy
        (whose ``attempt_timeout`` bounds the read calls only: a call's own ``retry`` applies as given).

        Metadata, later entries replacing earlier ones of the same key: the client's, the token's,
        the call's (a call's own ``authorization`` is sent instead of the token, which is then not
        read), then the caller's trace context (none of it when the metadata already has a key the
        propagator writes), and the call's ``x-request-id`` or one made up (the same for every
        attempt)."""
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be above 0 seconds, not {timeout!r}")
        if isinstance(retry, UseClientDefault):
            policy = self._retry if rpc.kind is Kind.READ or self._retry_unbounded is None else self._retry_unbounded
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
            pairs = (*pairs, *_trace_context(self._tracing, {key for key, _ in pairs}, self._trace_warning))
        ids = [value for key, value in own if key == REQUEST_ID_KEY]
        request_id = ids[-1] if ids else uuid.uuid4().hex
        pairs = (*(pair for pair in pairs if pair[0] != REQUEST_ID_KEY), (REQUEST_ID_KEY, request_id))
        deadline = None if seconds is None else time.monotonic() + seconds
        return CallPlan(rpc, pairs, request_id, deadline, policy, credentials)


def _trace_context(
    propagator: Propagator, present: set[str], warning: _RateLimitedWarning
) -> tuple[tuple[str, str], ...]:
    """What ``propagator`` writes for the current context; nothing when ``present`` (the metadata
    given) has any of its keys, for a context is sent whole or not at all. A propagator that fails,
    or an entry that is no valid metadata (``grpc-trace-bin``), never fails the call: it is left
    out, and ``warning`` says so in the log."""
    carrier: dict[str, str] = {}
    try:
        propagator(carrier)
    except Exception as error:  # the caller's tracing must never fail the call
        warning.emit("the trace context propagator raised %r; the call is sent without it", error)
        return ()
    if not carrier:
        return ()  # no span current: nothing to send, nothing to check
    pairs: list[tuple[str, str]] = []
    for key, value in carrier.items():
        try:
            pairs.extend(normalize_metadata([(key, value)]))
        except ValueError as error:
            warning.emit("a trace context entry is not sent: %s", error)
    if any(key in present for key, _ in pairs):
        return ()  # the call gave its own context
    return tuple(pairs)


class _RateLimitedWarning:
    """A WARNING on the client's logger, at most once per ``interval`` seconds (one per client)."""

    def __init__(self, interval: float) -> None:
        self._interval = interval
        self._next: float | None = None
        self._lock = threading.Lock()

    def emit(self, message: str, *args: object) -> None:
        now = time.monotonic()
        with self._lock:
            if self._next is not None and now < self._next:
                return
            self._next = now + self._interval
        log.warning("%s (said at most once every %.0f s)", message % args, self._interval)
