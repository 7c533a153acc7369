"""Each call's deadline, metadata and request ID, and when a failed attempt is sent again."""

from __future__ import annotations

import logging
import pickle
import time
from collections.abc import Callable
from typing import Any

import grpc
import pytest
from socialgraph_client import (
    USE_CLIENT_DEFAULT,
    Cancelled,
    DeadlineExceeded,
    Deadlines,
    RetryPolicy,
    SocialGraphError,
)
from socialgraph_client.calls import CallPlan, Lifecycle, Planner
from socialgraph_client.channel import plan_channel
from socialgraph_client.rpcs import FOLLOW, IS_FOLLOWING, SUGGEST_FOLLOWS, Rpc
from socialgraph_client.tokens import BearerToken

DEADLINES = Deadlines(read=1.0, write=2.0, heavy=3.0)
POLICY = RetryPolicy(max_attempts=6, initial_backoff=0.1, max_backoff=0.4, multiplier=2.0)
UNAVAILABLE, DEADLINE_EXCEEDED = grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED


def planner(retry: RetryPolicy | None = POLICY, deadlines: Deadlines = DEADLINES) -> Planner:
    return Planner(deadlines, retry, (("x-tenant", "feed"),))


def failure(code: grpc.StatusCode, retry_after: float | None = None) -> SocialGraphError:
    return SocialGraphError(code, "no", retry_after=retry_after)


@pytest.mark.parametrize(("rpc", "seconds"), [(IS_FOLLOWING, 1.0), (FOLLOW, 2.0), (SUGGEST_FOLLOWS, 3.0)])
def test_default_deadline_follows_the_kind_of_call(rpc: Rpc[Any, Any], seconds: float) -> None:
    plan = planner().plan(rpc, None, None)
    assert plan.timeout() == pytest.approx(seconds, abs=0.05)


def test_timeout_overrides_the_default_and_bounds_the_whole_call() -> None:
    plan = planner().plan(FOLLOW, 0.3, None)
    assert plan.timeout() == pytest.approx(0.3, abs=0.05)
    assert plan.deadline is not None
    assert plan.deadline - time.monotonic() <= 0.3


@pytest.mark.parametrize("timeout", [0, -1.0])
def test_a_timeout_that_is_not_positive_is_refused(timeout: float) -> None:
    with pytest.raises(ValueError, match="timeout"):
        planner().plan(FOLLOW, timeout, None)


def test_no_deadline_when_the_kind_has_none() -> None:
    plan = planner(deadlines=Deadlines(read=None)).plan(IS_FOLLOWING, None, None)
    assert plan.deadline is None
    assert plan.timeout() is None


def test_request_id_is_made_up_once_per_call_and_sent_after_the_clients_metadata() -> None:
    first, second = planner().plan(FOLLOW, None, None), planner().plan(FOLLOW, None, {"x-call": "1"})
    assert len(first.request_id) == 32
    assert first.request_id != second.request_id
    assert first.metadata == (("x-tenant", "feed"), ("x-request-id", first.request_id))
    assert second.metadata == (("x-tenant", "feed"), ("x-call", "1"), ("x-request-id", second.request_id))


def test_a_given_request_id_is_used_and_sent_once() -> None:
    plan = planner().plan(FOLLOW, None, [("x-request-id", "mine-1")])
    assert plan.request_id == "mine-1"
    assert [value for key, value in plan.metadata if key == "x-request-id"] == ["mine-1"]


def test_unavailable_backs_off_exponentially_with_jitter_up_to_the_cap() -> None:
    plan = planner().plan(FOLLOW, 60, None)
    ceilings = [0.1, 0.2, 0.4, 0.4, 0.4]
    for ceiling in ceilings:
        plan.timeout()
        wait = plan.wait_before_retry(failure(grpc.StatusCode.UNAVAILABLE))
        assert wait is not None
        assert ceiling / 2 <= wait <= ceiling
    plan.timeout()  # the sixth attempt is the last of max_attempts=6
    assert plan.wait_before_retry(failure(grpc.StatusCode.UNAVAILABLE)) is None


@pytest.mark.parametrize(
    "code",
    [grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.DEADLINE_EXCEEDED,
     grpc.StatusCode.INTERNAL, grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAUTHENTICATED],
)  # fmt: skip
def test_other_codes_are_not_retried(code: grpc.StatusCode) -> None:
    plan = planner().plan(FOLLOW, None, None)
    plan.timeout()
    assert plan.wait_before_retry(failure(code)) is None


def test_resource_exhausted_waits_what_retry_info_says_and_only_then() -> None:
    plan = planner().plan(FOLLOW, 60, None)
    plan.timeout()
    assert plan.wait_before_retry(failure(grpc.StatusCode.RESOURCE_EXHAUSTED)) is None
    wait = plan.wait_before_retry(failure(grpc.StatusCode.RESOURCE_EXHAUSTED, retry_after=1.5))
    assert wait is not None
    assert 1.5 <= wait <= 1.65
    off = planner(RetryPolicy(honour_retry_info=False)).plan(FOLLOW, 60, None)
    off.timeout()
    assert off.wait_before_retry(failure(grpc.StatusCode.RESOURCE_EXHAUSTED, retry_after=1.5)) is None


def test_no_wait_ends_past_the_deadline() -> None:
    """A rate limit that lifts in an hour is raised at once, not slept on; so is a backoff past the deadline."""
    plan = planner().plan(FOLLOW, 0.5, None)
    plan.timeout()
    assert plan.wait_before_retry(failure(grpc.StatusCode.RESOURCE_EXHAUSTED, retry_after=3600)) is None
    tight = planner(RetryPolicy(initial_backoff=2.0, max_backoff=2.0)).plan(FOLLOW, 0.5, None)
    tight.timeout()
    assert tight.wait_before_retry(failure(grpc.StatusCode.UNAVAILABLE)) is None


def test_retries_off() -> None:
    plan = planner(None).plan(FOLLOW, None, None)
    plan.timeout()
    assert plan.wait_before_retry(failure(grpc.StatusCode.UNAVAILABLE)) is None


@pytest.mark.parametrize(
    "make",
    [
        lambda: RetryPolicy(max_attempts=0),
        lambda: RetryPolicy(initial_backoff=0),
        lambda: RetryPolicy(initial_backoff=3, max_backoff=1),
        lambda: RetryPolicy(multiplier=0.5),
        lambda: RetryPolicy(attempt_timeout=0),
        lambda: Deadlines(read=0),
        lambda: Deadlines(write=-1),
    ],
)
def test_bad_options_are_refused_when_made(make: Callable[[], object]) -> None:
    with pytest.raises(ValueError, match=r"RetryPolicy|Deadlines"):
        make()


def test_a_retry_info_longer_than_the_policy_waits_is_raised_even_without_a_deadline() -> None:
    plan = planner(deadlines=Deadlines(write=None)).plan(FOLLOW, None, None)
    plan.timeout()
    assert plan.wait_before_retry(failure(grpc.StatusCode.RESOURCE_EXHAUSTED, retry_after=3600)) is None
    assert plan.wait_before_retry(failure(grpc.StatusCode.RESOURCE_EXHAUSTED, retry_after=0.0)) == 0.0


def test_a_request_id_for_every_call_of_a_client_is_refused() -> None:
    with pytest.raises(ValueError, match="x-request-id"):
        plan_channel("h:1", token=None, tls=None, credentials=None, metadata={"x-request-id": "a"}, options=())


def test_metadata_keys_are_lower_cased_and_bad_ones_refused_before_any_call() -> None:
    plan = planner().plan(FOLLOW, None, {"X-Trace": "t1"})
    assert ("x-trace", "t1") in plan.metadata
    for bad in ({"x trace": "1"}, {"grpc-timeout": "1"}, {"x-bin": "1"}, {"x-ok": 7}, {"x-ok": "line\nbreak"}):
        with pytest.raises(ValueError, match="metadata"):
            planner().plan(FOLLOW, None, bad)  # type: ignore[arg-type]  # {"x-ok": 7} is refused on purpose


def test_a_calls_metadata_replaces_the_clients_for_the_same_key() -> None:
    """A per-call ``authorization`` is sent instead of the client's token, not beside it."""
    client = Planner(DEADLINES, POLICY, (("authorization", "Bearer client"), ("x-tenant", "feed")))
    plan = client.plan(FOLLOW, None, {"Authorization": "Bearer call"})
    assert [value for key, value in plan.metadata if key == "authorization"] == ["Bearer call"]
    assert ("x-tenant", "feed") in plan.metadata


def test_the_default_policy_retries_until_the_deadline_not_a_count() -> None:
    plan = planner(RetryPolicy()).plan(FOLLOW, 60, None)
    for _ in range(40):
        plan.timeout()
        assert plan.wait_before_retry(failure(grpc.StatusCode.UNAVAILABLE)) is not None


def attempts(plan: CallPlan, *codes: grpc.StatusCode) -> SocialGraphError:
    """Run ``plan``'s attempts failing with ``codes`` in turn, as a transport does, until it stops
    retrying; return the error the call raises."""
    for code in codes:
        plan.timeout()
        error = failure(code)
        if plan.wait_before_retry(error) is None:
            return plan.final(error)
    raise AssertionError(f"still retrying after {codes}")


def test_a_retry_that_times_out_after_unavailable_is_deadline_exceeded_not_unavailable() -> None:
    """attempt 1 ``UNAVAILABLE``, attempt 2 cut by its ``attempt_timeout`` and the last of
    ``max_attempts``: the second may have been carried out, so the call is ``DeadlineExceeded``, the
    error that says a write may have committed; the same when the call's deadline cut it."""
    hung = RetryPolicy(attempt_timeout=0.3, max_attempts=2)
    raised = attempts(planner().plan(FOLLOW, 3.0, None, hung), UNAVAILABLE, DEADLINE_EXCEEDED)
    assert (raised.code(), raised.attempts) == (DEADLINE_EXCEEDED, 2)
    deadline = attempts(planner(RetryPolicy()).plan(FOLLOW, 3.0, None), UNAVAILABLE, DEADLINE_EXCEEDED)
    assert (deadline.code(), deadline.attempts) == (DEADLINE_EXCEEDED, 2)


def test_an_attempt_that_timed_out_then_no_answer_is_deadline_exceeded_and_a_definite_answer_is_raised() -> None:
    """After an attempt cut by its ``attempt_timeout``, a last attempt that got no answer either
    (``UNAVAILABLE``) makes the call ``DeadlineExceeded`` (named after the last failure, with every
    attempt counted); a last attempt the server answered (``INVALID_ARGUMENT``) is raised as it is."""
    hung = RetryPolicy(attempt_timeout=0.3, max_attempts=2)
    raised = attempts(planner().plan(FOLLOW, 3.0, None, hung), DEADLINE_EXCEEDED, UNAVAILABLE)
    assert isinstance(raised, DeadlineExceeded)
    assert raised.attempts == 2
    assert "UNAVAILABLE" in raised.message
    answered = attempts(planner().plan(FOLLOW, 3.0, None, hung), DEADLINE_EXCEEDED, grpc.StatusCode.INVALID_ARGUMENT)
    assert (answered.code(), answered.attempts) == (grpc.StatusCode.INVALID_ARGUMENT, 2)
    unreached = attempts(planner(RetryPolicy(max_attempts=3)).plan(FOLLOW, 3.0, None), *[UNAVAILABLE] * 3)
    assert (unreached.code(), unreached.attempts) == (UNAVAILABLE, 3)  # no attempt timed out: nothing was done
    first = planner().plan(FOLLOW, 60, None)
    first.timeout()
    late = failure(DEADLINE_EXCEEDED)
    assert first.wait_before_retry(late) is None
    assert first.final(late) is late  # one attempt, cut by the deadline: its own error


def test_a_negative_retry_info_waits_nothing() -> None:
    plan = planner().plan(FOLLOW, 60, None)
    plan.timeout()
    assert plan.wait_before_retry(failure(grpc.StatusCode.RESOURCE_EXHAUSTED, retry_after=-5.0)) == 0.0


def test_a_closed_client_or_a_forked_process_is_refused_clearly() -> None:
    lifecycle = Lifecycle()
    lifecycle.check()
    lifecycle._pid -= 1  # as in a child after fork()
    with pytest.raises(RuntimeError, match="fork"):
        lifecycle.check()
    lifecycle.closed = True
    with pytest.raises(Cancelled, match="closed"):
        lifecycle.check()
    plan = planner().plan(FOLLOW, None, None)
    plan.timeout()
    with pytest.raises(Cancelled) as refused:
        lifecycle.check(plan)  # closed between two attempts of a call: the call's ID and attempts so far
    assert (refused.value.request_id, refused.value.attempts) == (plan.request_id, 1)


def test_an_attempt_gets_its_own_timeout_when_shorter_than_the_time_left() -> None:
    policy = RetryPolicy(attempt_timeout=0.5)
    plan = planner(policy).plan(IS_FOLLOWING, 2.0, None)
    assert plan.timeout() == 0.5
    short = planner(policy).plan(IS_FOLLOWING, 0.2, None)
    assert short.timeout() == pytest.approx(0.2, abs=0.05)  # the deadline is nearer: the time left
    endless = planner(policy, Deadlines(read=None)).plan(IS_FOLLOWING, None, None)
    assert endless.timeout() == 0.5


def test_the_clients_attempt_timeout_bounds_reads_only_and_a_calls_own_bounds_any_call() -> None:
    """Given to ``connect``, ``attempt_timeout`` would cut a slow write or a heavy read every so often
    for ever; it bounds the reads. Given to one call, it bounds that call whatever its kind."""
    client = planner(RetryPolicy(attempt_timeout=0.5, max_attempts=4))
    assert client.plan(IS_FOLLOWING, None, None).timeout() == 0.5
    write, heavy = client.plan(FOLLOW, None, None), client.plan(SUGGEST_FOLLOWS, None, None)
    assert write.timeout() == pytest.approx(2.0, abs=0.05)
    assert heavy.timeout() == pytest.approx(3.0, abs=0.05)
    assert write.retry == RetryPolicy(max_attempts=4)  # the rest of the client's policy holds
    own = RetryPolicy(attempt_timeout=0.5)
    assert client.plan(FOLLOW, None, None, own).timeout() == 0.5
    assert client.plan(SUGGEST_FOLLOWS, None, None, own).timeout() == 0.5


def test_an_attempt_that_ran_out_of_its_own_timeout_is_retried_and_one_that_ran_out_of_the_calls_is_not() -> None:
    """``DEADLINE_EXCEEDED`` after an attempt's own timeout (a hung replica) is retried with backoff;
    after the call's deadline (the attempt had all the time left) it is raised."""
    plan = planner(RetryPolicy(attempt_timeout=0.5)).plan(IS_FOLLOWING, 60, None)
    plan.timeout()
    wait = plan.wait_before_retry(failure(grpc.StatusCode.DEADLINE_EXCEEDED))
    assert wait is not None
    assert 0.025 <= wait <= 0.05
    last = planner(RetryPolicy(attempt_timeout=5.0)).plan(IS_FOLLOWING, 0.3, None)
    last.timeout()  # 0.3 s left: the attempt gets the time left, not its 5 s
    assert last.wait_before_retry(failure(grpc.StatusCode.DEADLINE_EXCEEDED)) is None
    without = planner(RetryPolicy()).plan(FOLLOW, 60, None)
    without.timeout()
    assert without.wait_before_retry(failure(grpc.StatusCode.DEADLINE_EXCEEDED)) is None


def test_a_calls_retry_replaces_the_clients_policy() -> None:
    client = planner(POLICY)
    assert client.plan(FOLLOW, None, None).retry is POLICY
    assert client.plan(FOLLOW, None, None, USE_CLIENT_DEFAULT).retry is POLICY
    assert client.plan(FOLLOW, None, None, None).retry is None
    own = RetryPolicy(max_attempts=2)
    assert planner(None).plan(FOLLOW, None, None, own).retry is own
    with pytest.raises(ValueError, match="retry must be a RetryPolicy"):
        client.plan(FOLLOW, None, None, 3)  # type: ignore[arg-type]  # refused on purpose
    assert pickle.loads(pickle.dumps(USE_CLIENT_DEFAULT)) is USE_CLIENT_DEFAULT  # noqa: S301 - our own bytes


def test_a_token_function_is_called_for_each_call_and_carried_by_transport() -> None:
    """Plaintext: ``authorization`` metadata, replacing the client's own; TLS: call credentials (made
    once per token value). A call's own ``authorization`` wins, and the function is then not called."""
    tokens = iter(["one", "two", "two"])
    called: list[str] = []

    def current() -> str:
        called.append(next(tokens))
        return called[-1]

    plain = Planner(DEADLINES, POLICY, (("authorization", "Bearer static"),), token=BearerToken(current, secure=False))
    first, second = plain.plan(FOLLOW, None, None), plain.plan(FOLLOW, None, None)
    assert [value for key, value in first.metadata if key == "authorization"] == ["Bearer one"]
    assert [value for key, value in second.metadata if key == "authorization"] == ["Bearer two"]
    assert first.credentials is None
    own = plain.plan(FOLLOW, None, {"authorization": "Bearer own"})
    assert [value for key, value in own.metadata if key == "authorization"] == ["Bearer own"]
    assert called == ["one", "two"]
    secure = Planner(DEADLINES, POLICY, (), token=BearerToken(lambda: "same", secure=True))
    a, b = secure.plan(FOLLOW, None, None), secure.plan(FOLLOW, None, None)
    assert not any(key == "authorization" for key, _ in a.metadata)
    assert a.credentials is not None
    assert a.credentials is b.credentials


@pytest.mark.parametrize(
    ("token", "message"), [("", "token is empty"), ("s3cr3t\nvalue", "printable ASCII"), (5, "str")]
)
def test_a_bad_token_is_refused_without_showing_it(token: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message) as refused:
        plan_channel("h:1", token=token, tls=None, credentials=None, metadata=None, options=())
    assert "s3cr3t" not in str(refused.value)
    provided = Planner(DEADLINES, POLICY, (), token=BearerToken(lambda: token, secure=False))
    with pytest.raises(ValueError, match="token function's result"):
        provided.plan(FOLLOW, None, None)


def test_the_trace_context_comes_after_the_calls_metadata_and_never_replaces_it() -> None:
    def propagate(carrier: dict[str, str]) -> None:
        carrier.update({"traceparent": "00-ab-cd-01", "Baggage": "k=v"})

    traced = Planner(DEADLINES, POLICY, (), tracing=propagate)
    plan = traced.plan(FOLLOW, None, {"x-tenant": "feed"})
    assert [key for key, _ in plan.metadata] == ["x-tenant", "traceparent", "baggage", "x-request-id"]
    own = traced.plan(FOLLOW, None, {"traceparent": "00-mine-01-01"})
    assert [value for key, value in own.metadata if key == "traceparent"] == ["00-mine-01-01"]
    quiet = Planner(DEADLINES, POLICY, (), tracing=lambda carrier: None)
    assert [key for key, _ in quiet.plan(FOLLOW, None, None).metadata] == ["x-request-id"]


def test_a_call_that_gives_any_key_of_the_trace_context_gets_none_of_the_current_one() -> None:
    """A context is sent whole or not at all: a call's own ``traceparent`` does not travel with the
    current span's ``tracestate`` and ``baggage``."""

    def propagate(carrier: dict[str, str]) -> None:
        carrier.update({"traceparent": "00-ab-cd-01", "tracestate": "vendor=current", "baggage": "k=v"})

    traced = Planner(DEADLINES, POLICY, (), tracing=propagate)
    own = traced.plan(FOLLOW, None, {"traceparent": "00-mine-01-01"})
    assert [pair for pair in own.metadata if pair[0] != "x-request-id"] == [("traceparent", "00-mine-01-01")]
    baggage_only = traced.plan(FOLLOW, None, {"baggage": "mine=1"})
    assert [pair for pair in baggage_only.metadata if pair[0] != "x-request-id"] == [("baggage", "mine=1")]


def test_a_propagator_that_fails_or_writes_what_metadata_cannot_carry_never_fails_the_call(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A propagator that raises: the call goes without a context. One that writes a binary
    ``grpc-trace-bin`` beside a ``traceparent``: the call goes with the ``traceparent`` alone. Either
    is said by one WARNING, not one per call."""

    def broken(carrier: dict[str, str]) -> None:
        raise RuntimeError("no tracer")

    def census(carrier: dict[str, Any]) -> None:
        carrier.update({"grpc-trace-bin": b"\x00\x01", "traceparent": "00-ab-cd-01"})

    failing = Planner(DEADLINES, POLICY, (), tracing=broken)
    binary = Planner(DEADLINES, POLICY, (), tracing=census)
    with caplog.at_level(logging.WARNING, logger="socialgraph_client"):
        for _ in range(3):
            assert [key for key, _ in failing.plan(FOLLOW, None, None).metadata] == ["x-request-id"]
            assert [key for key, _ in binary.plan(FOLLOW, None, None).metadata] == ["traceparent", "x-request-id"]
    said = [record.getMessage() for record in caplog.records]
    assert len(said) == 2, said  # once per client
    assert "RuntimeError('no tracer')" in said[0]
    assert "grpc-trace-bin" in said[1]


def test_channel_defaults_keep_a_long_lived_connection_checked_and_options_override_them() -> None:
    """A ping every 30 s, idle or not, answered within 10 s (else the connection is closed); the
    caller's ``options=`` win."""
    plan = plan_channel("h:1", token=None, tls=None, credentials=None, metadata=None, options=())
    options = dict(plan.options)
    assert options["grpc.keepalive_time_ms"] == 30_000
    assert options["grpc.keepalive_timeout_ms"] == options["grpc.http2.ping_timeout_ms"] == 10_000
    assert options["grpc.keepalive_permit_without_calls"] == 1
    assert options["grpc.http2.max_pings_without_data"] == 0
    given = plan_channel(
        "h:1", token=None, tls=None, credentials=None, metadata=None, options=[("grpc.keepalive_time_ms", 60_000)]
    )
    assert dict(given.options)["grpc.keepalive_time_ms"] == 60_000


def test_the_service_accepts_the_clients_keepalive_pings() -> None:
    """The server lets a client ping idle connections at least as often as this client does, so it
    never ends them with GOAWAY ``too_many_pings``."""
    from graph_service.api.server import KEEPALIVE

    server, client = (
        dict(KEEPALIVE),
        dict(plan_channel("h:1", token=None, tls=None, credentials=None, metadata=None, options=()).options),
    )
    assert server["grpc.keepalive_permit_without_calls"] == client["grpc.keepalive_permit_without_calls"] == 1
    assert server["grpc.http2.min_ping_interval_without_data_ms"] < client["grpc.keepalive_time_ms"]
