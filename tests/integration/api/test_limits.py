"""The follow rate limit and the following cap through the RPC, on DynamoDB Local and Redis (SPEC §7.2)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph_client import AsyncSocialGraphClient, Reason, ResourceExhausted

from graph_service.domain.models import Direction
from graph_service.entrypoints.server import ServerRuntime
from graph_service.settings import Settings
from tests.support.graph_calls import Stub, accept, block, follow, ids, rejected, set_private, unfollow
from tests.support.runtimes import running_server, stub_for
from tests.support.servers import OwnRedis

EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED
PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION
FOLLOWING = pb.FOLLOW_STATE_FOLLOWING


@pytest.fixture
async def limited(settings: Settings) -> AsyncIterator[tuple[ServerRuntime, Stub]]:
    """A server allowing 3 follows per hour per actor, and 25 follows plus requests per account."""
    configured = replace(settings, follow_rate_limit=3, follow_rate_window_seconds=3600, max_following=25)
    async with running_server(configured) as server, stub_for(server.port) as stub:
        yield server, stub


def retry_delay(error: grpc.aio.AioRpcError) -> float:
    status = rpc_status.from_call(error)  # type: ignore[arg-type]  # an aio error has the grpc.Call parts it reads
    assert status is not None
    for detail in status.details:
        retry = error_details_pb2.RetryInfo()
        if detail.Unpack(retry):
            return float(retry.retry_delay.ToNanoseconds()) / 1e9
    raise AssertionError("no RetryInfo")


async def test_the_fourth_follow_is_rate_limited_with_retry_info_and_writes_nothing(
    limited: tuple[ServerRuntime, Stub],
) -> None:
    """RESOURCE_EXHAUSTED / RATE_LIMITED, RetryInfo just under the window, the limit in the metadata;
    the refused follow made no edge; repeats of a made follow still answer FOLLOWING, for free; the
    Python client's error carries the wait as ``retry_after``."""
    server, stub = limited
    for followee in (2, 3, 4):
        assert await follow(stub, 1, followee) == FOLLOWING
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stub.Follow(pb.FollowRequest(follower_id=1, followee_id=5))
    assert refused.value.code() == EXHAUSTED
    info = await rejected(stub.Follow(pb.FollowRequest(follower_id=1, followee_id=5)), EXHAUSTED, "RATE_LIMITED")
    assert dict(info.metadata) == {"actor_id": "1", "limit": "3", "window_seconds": "3600"}
    assert 3500 < retry_delay(refused.value) <= 3600
    assert await follow(stub, 1, 2) == FOLLOWING
    assert sorted(await ids(stub, Direction.FOLLOWING, 1)) == [2, 3, 4]
    assert await ids(stub, Direction.FOLLOWERS, 5) == []
    assert await follow(stub, 2, 5) == FOLLOWING  # another actor's budget is its own
    async with await AsyncSocialGraphClient.connect(f"127.0.0.1:{server.port}") as client:
        with pytest.raises(ResourceExhausted) as limited_error:
            await client.follow(1, 6)  # not retried: the wait is an hour, past the call's deadline
    assert limited_error.value.reason == Reason.RATE_LIMITED
    assert limited_error.value.attempts == 1
    assert limited_error.value.retry_after is not None
    assert 3500 < limited_error.value.retry_after <= 3600


async def test_refused_follows_and_unfollows_leave_the_budget_as_it_was(limited: tuple[ServerRuntime, Stub]) -> None:
    """Self-follows, follows across a block and unfollows take no budget; an unfollow gives none back."""
    _, stub = limited
    await block(stub, 9, 1)
    for _ in range(3):
        await rejected(
            stub.Follow(pb.FollowRequest(follower_id=1, followee_id=1)), grpc.StatusCode.INVALID_ARGUMENT, "SELF_FOLLOW"
        )
        await rejected(stub.Follow(pb.FollowRequest(follower_id=1, followee_id=9)), PRECONDITION, "BLOCKED")
    for followee in (2, 3, 4):
        assert await follow(stub, 1, followee) == FOLLOWING
        await unfollow(stub, 1, followee)
    await rejected(stub.Follow(pb.FollowRequest(follower_id=1, followee_id=5)), EXHAUSTED, "RATE_LIMITED")


async def test_concurrent_follows_of_many_actors_each_stop_at_the_limit(limited: tuple[ServerRuntime, Stub]) -> None:
    """Five actors, ten concurrent follows each: exactly three edges each, the rest RATE_LIMITED."""
    _, stub = limited

    async def attempt(actor: int, followee: int) -> str:
        try:
            await stub.Follow(pb.FollowRequest(follower_id=actor, followee_id=followee))
        except grpc.aio.AioRpcError as error:
            return error.code().name
        return "OK"

    actors = range(100, 105)
    outcomes = await asyncio.gather(*(attempt(a, 1000 + f) for a in actors for f in range(10)))
    assert outcomes.count("OK") == 15
    assert outcomes.count("RESOURCE_EXHAUSTED") == 35
    for actor in actors:
        assert len(await ids(stub, Direction.FOLLOWING, actor)) == 3


async def test_concurrent_follows_at_the_cap_leave_exactly_the_cap(settings: Settings) -> None:
    """20 concurrent follows by an account 5 below the cap: 5 made, 15 FOLLOW_LIMIT (naming the cap);
    a pending request holds a place, and accepting it never passes the cap."""
    capped = replace(settings, follow_rate_limit=0, max_following=25)
    async with running_server(capped) as server, stub_for(server.port) as stub:
        await set_private(stub, 500, True)
        assert await follow(stub, 1, 500) == pb.FOLLOW_STATE_REQUESTED
        await asyncio.gather(*(follow(stub, 1, followee) for followee in range(100, 119)))

        async def attempt(followee: int) -> str:
            try:
                await stub.Follow(pb.FollowRequest(follower_id=1, followee_id=followee))
            except grpc.aio.AioRpcError as error:
                return error.code().name
            return "OK"

        outcomes = await asyncio.gather(*(attempt(f) for f in range(200, 220)))
        assert outcomes.count("OK") == 5
        assert outcomes.count("FAILED_PRECONDITION") == 15
        info = await rejected(
            stub.Follow(pb.FollowRequest(follower_id=1, followee_id=300)), PRECONDITION, "FOLLOW_LIMIT"
        )
        assert dict(info.metadata) == {"follower_id": "1", "cap": "25"}
        assert len(await ids(stub, Direction.FOLLOWING, 1)) == 24
        await accept(stub, 500, 1)
        following = await ids(stub, Direction.FOLLOWING, 1)
        assert len(following) == 25
        assert 500 in following
        await unfollow(stub, 1, 100)
        assert await follow(stub, 1, 300) == FOLLOWING


async def test_with_redis_down_the_limit_fails_open_and_counts_it(settings: Settings, own_redis: OwnRedis) -> None:
    """Redis stopped: follows past the limit still succeed (the graph does not depend on Redis), and
    the server counts each follow let through uncounted."""
    configured = replace(settings, redis_url=own_redis.url, follow_rate_limit=1, redis_timeout_seconds=0.25)
    async with running_server(configured) as server, stub_for(server.port) as stub:
        assert await follow(stub, 1, 2) == FOLLOWING
        await rejected(stub.Follow(pb.FollowRequest(follower_id=1, followee_id=3)), EXHAUSTED, "RATE_LIMITED")
        own_redis.stop()
        for followee in (3, 4, 5):
            assert await follow(stub, 1, followee) == FOLLOWING
        assert server.budget is not None
        assert server.budget.failed_open >= 3
        assert sorted(await ids(stub, Direction.FOLLOWING, 1)) == [2, 3, 4, 5]
