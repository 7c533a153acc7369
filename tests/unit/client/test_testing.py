"""``socialgraph_client.testing`` on its own (its rules are held to a real server by
``tests/integration/client/test_testing_double.py``): the limits it copies from the service, the
following cap's 0, and the failures a caller's test makes with ``fail_next``."""

from __future__ import annotations

import asyncio
from dataclasses import fields

import grpc
import pytest
from socialgraph_client import (
    DeadlineExceeded,
    FollowState,
    Reason,
    ResourceExhausted,
    Unavailable,
    Unimplemented,
    fake_graph,
    fake_pages,
    fake_service,
)
from socialgraph_client.testing import FakeAsyncSocialGraphClient, FakeGraph, FakeSocialGraphClient

from graph_service.rules import home_timeline, mutes, suggestions
from graph_service.rules.limits import RuleLimits
from graph_service.settings import Settings


def test_the_limits_the_double_copies_are_the_services() -> None:
    """The client package may not import the server, so the double holds copies of its limits; a
    limit changed in the service and not in the double fails here."""
    limits = RuleLimits(page_token_secrets=("k",))
    double = {
        "default page size": fake_pages.DEFAULT_PAGE_SIZE,
        "max page size": fake_pages.MAX_PAGE_SIZE,
        "max batch": fake_graph.MAX_BATCH,
        "default following cap": fake_graph.DEFAULT_MAX_FOLLOWING,
        "longest mute": fake_graph.MAX_DURATION_NS,
        "default suggestions": fake_service.DEFAULT_SUGGESTIONS,
        "max suggestions": fake_service.MAX_SUGGESTIONS,
        "followees sampled": fake_service.SUGGEST_FOLLOWEE_SAMPLE,
        "per followee": fake_service.SUGGEST_PER_FOLLOWEE,
    }
    service = {
        "default page size": limits.default_page_size,
        "max page size": limits.max_page_size,
        "max batch": limits.max_batch_size,
        "default following cap": {field.name: field.default for field in fields(Settings)}["max_following"],
        "longest mute": mutes.MAX_DURATION_NS,
        "default suggestions": suggestions.DEFAULT_SUGGESTIONS,
        "max suggestions": suggestions.MAX_SUGGESTIONS,
        "followees sampled": limits.suggest_followee_sample,
        "per followee": limits.suggest_per_followee,
    }
    assert double == service
    timeline = {"default page size": home_timeline.DEFAULT_PAGE_SIZE, "max page size": home_timeline.MAX_PAGE_SIZE}
    assert timeline == {"default page size": 20, "max page size": 100}  # as the client's README and docstring say


def test_a_following_cap_of_0_is_no_cap_as_in_the_service() -> None:
    client = FakeSocialGraphClient(FakeGraph(max_following=0))
    assert {client.follow(1, followee) for followee in range(2, 12)} == {FollowState.FOLLOWING}
    assert client.get_counts(1).following == 10
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="max_following"):
            FakeGraph(max_following=bad)  # type: ignore[arg-type]  # refused on purpose


def test_fail_next_makes_the_next_call_raise_what_the_client_would_and_do_nothing() -> None:
    """An outage, a deadline and a rate limit (reason and ``RetryInfo`` delay) as the client raises
    them once its retries gave up; the failing call changes nothing, the next one is served."""
    graph = FakeGraph()
    client = FakeSocialGraphClient(graph)
    graph.fail_next(grpc.StatusCode.UNAVAILABLE)
    with pytest.raises(Unavailable) as outage:
        client.follow(1, 2, metadata={"x-request-id": "feed-1"})
    assert (outage.value.code(), outage.value.attempts, outage.value.request_id) == (
        grpc.StatusCode.UNAVAILABLE,
        1,
        "feed-1",
    )
    assert not client.is_following(1, 2)
    graph.fail_next(grpc.StatusCode.DEADLINE_EXCEEDED)
    with pytest.raises(DeadlineExceeded):
        client.get_counts(1)
    graph.fail_next(grpc.StatusCode.RESOURCE_EXHAUSTED, Reason.RATE_LIMITED, retry_after=30)
    with pytest.raises(ResourceExhausted) as limited:
        client.follow(1, 2)
    assert (limited.value.reason, limited.value.retry_after) == (Reason.RATE_LIMITED, 30.0)
    assert limited.value.reason is Reason.RATE_LIMITED
    assert client.follow(1, 2) is FollowState.FOLLOWING


def test_failures_queue_in_order_for_every_client_of_the_graph() -> None:
    graph = FakeGraph()
    blocking, asynchronous = FakeSocialGraphClient(graph), FakeAsyncSocialGraphClient(graph)
    graph.fail_next(grpc.StatusCode.UNAVAILABLE)
    graph.fail_next(grpc.StatusCode.UNIMPLEMENTED, retry_after=0.5)
    with pytest.raises(Unavailable):
        asyncio.run(asynchronous.is_following(1, 2))
    with pytest.raises(Unimplemented) as second:
        blocking.list_followers(1)
    assert (second.value.reason, second.value.retry_after) == ("", 0.5)
    assert asyncio.run(asynchronous.is_following(1, 2)) is False


@pytest.mark.parametrize(
    ("code", "reason", "retry_after", "message"),
    [
        (grpc.StatusCode.OK, None, None, "code must be"),
        ("UNAVAILABLE", None, None, "code must be"),
        (grpc.StatusCode.UNAVAILABLE, 7, None, "reason must be"),
        (grpc.StatusCode.UNAVAILABLE, None, -1, "retry_after must be"),
        (grpc.StatusCode.UNAVAILABLE, None, "soon", "retry_after must be"),
    ],
)
def test_fail_next_refuses_what_no_server_could_send(
    code: object, reason: object, retry_after: object, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        FakeGraph().fail_next(code, reason, retry_after)  # type: ignore[arg-type]  # refused on purpose
