"""Each call's deadline, metadata and request ID, and when a failed attempt is sent again."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import grpc
import pytest
from socialgraph_client import Cancelled, Deadlines, RetryPolicy, SocialGraphError
from socialgraph_client.calls import Lifecycle, Planner
from socialgraph_client.channel import plan_channel
from socialgraph_client.rpcs import FOLLOW, IS_FOLLOWING, SUGGEST_FOLLOWS, Rpc

DEADLINES = Deadlines(read=1.0, write=2.0, heavy=3.0)
POLICY = RetryPolicy(max_attempts=6, initial_backoff=0.1, max_backoff=0.4, multiplier=2.0)


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


def test_a_deadline_that_runs_out_on_a_retry_raises_what_was_retried() -> None:
    """``DEADLINE_EXCEEDED`` of the last attempt hides less than the ``UNAVAILABLE`` that caused it."""
    plan = planner().plan(FOLLOW, 60, None)
    plan.timeout()
    unavailable = failure(grpc.StatusCode.UNAVAILABLE)
    assert plan.wait_before_retry(unavailable) is not None
    plan.timeout()
    late = failure(grpc.StatusCode.DEADLINE_EXCEEDED)
    assert plan.wait_before_retry(late) is None
    raised = plan.final(late)
    assert raised is unavailable
    assert raised.attempts == 2
    first = planner().plan(FOLLOW, 60, None)
    first.timeout()
    assert first.final(late) is late  # no retry ran: the deadline is the news


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
