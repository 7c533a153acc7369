"""``socialgraph_client.testing`` against a real server: each test makes the same calls through the
asyncio double, the blocking double and the real client connected to a served socialgraph, and
asserts the same answers of each: values, pages and tokens, error classes, codes, reasons and
metadata.

One server (with the counters consumer, for counts) serves the whole module; each test uses user
IDs of its own. The server and the doubles have the same following cap, 5, so ``FOLLOW_LIMIT`` is
part of the contract.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

import grpc
import pytest
import pytest_asyncio
import redis
from socialgraph_client import (
    AsyncSocialGraphClient,
    FailedPrecondition,
    FollowState,
    NotFound,
    Page,
    Reason,
    SocialGraphClient,
    SocialGraphError,
    Unimplemented,
)
from socialgraph_client.testing import FakeAsyncSocialGraphClient, FakeGraph, FakeSocialGraphClient
from socialgraph_devstack.processes import ManagedProcess

from tests.support.polling import eventually
from tests.support.runtimes import make_settings, running_counters, running_server
from tests.support.servers import trust_as_reset
from tests.support.tables import create_tables, drop_tables

pytestmark = pytest.mark.asyncio(loop_scope="module")

CAP = 5
"""The following cap of the module's server and of the doubles."""
USERS = itertools.count(1_000, 100)
"""The first user ID of each test run; a run uses the hundred IDs from it."""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def served(dynamodb_local: str, redis_node: ManagedProcess) -> AsyncIterator[str]:
    """The address of a server (on fresh tables, with the counters consumer) for the whole module."""
    client = redis.Redis(port=redis_node.port)
    client.flushall()
    trust_as_reset(client)
    client.close()
    settings = replace(make_settings(dynamodb_local, f"redis://127.0.0.1:{redis_node.port}/0"), max_following=CAP)
    await create_tables(settings, streams=True)
    try:
        async with running_server(settings) as server, running_counters(settings):
            yield f"127.0.0.1:{server.port}"
    finally:
        await drop_tables(settings)


class Blocking:
    """A blocking client's methods as coroutines (its iterators as asynchronous ones), so that one
    test body drives both kinds of client. The calls run on the event loop's thread: only for the
    double, which never waits on anything."""

    def __init__(self, client: SocialGraphClient) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._client, name)
        if name.startswith("iter_"):

            async def walk(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
                for item in method(*args, **kwargs):
                    yield item

            return walk

        async def call(*args: Any, **kwargs: Any) -> Any:
            return method(*args, **kwargs)

        return call


@pytest_asyncio.fixture(params=["double", "blocking double", "server"], loop_scope="module")
async def graph(request: pytest.FixtureRequest, served: str) -> AsyncIterator[Any]:
    """The client under test: an asyncio double, a blocking double, or the real asyncio client."""
    if request.param == "server":
        async with await AsyncSocialGraphClient.connect(served) as client:
            yield client
    elif request.param == "double":
        async with FakeAsyncSocialGraphClient(FakeGraph(max_following=CAP)) as double:
            yield double
    else:
        with FakeSocialGraphClient(FakeGraph(max_following=CAP)) as blocking:
            yield Blocking(blocking)


@pytest.fixture
def u() -> int:
    """This run's first user ID."""
    return next(USERS)


async def refusal(call: Any) -> SocialGraphError:
    """The error a call raised (it must raise one)."""
    with pytest.raises(SocialGraphError) as raised:
        await call
    return raised.value


def said(error: SocialGraphError) -> tuple[str, grpc.StatusCode, str, dict[str, str]]:
    """What a caller reads of an error: its class, code, reason and metadata."""
    return type(error).__name__, error.code(), error.reason, error.metadata


async def ids(pages: AsyncIterator[Any]) -> list[int]:
    return [entry.user_id async for entry in pages]


def of(page: Page[Any]) -> tuple[list[int], bool]:
    return [entry.user_id for entry in page], page.last


async def test_follow_is_idempotent_and_seen_at_once(graph: Any, u: int) -> None:
    a, b = u + 1, u + 2
    assert await graph.follow(a, b) == FollowState.FOLLOWING
    assert await graph.follow(a, b) == FollowState.FOLLOWING
    assert await graph.is_following(a, b) is True
    assert await graph.is_following(b, a) is False
    await graph.unfollow(a, b)
    await graph.unfollow(a, b)
    assert await graph.is_following(a, b) is False
    error = await refusal(graph.follow(a, a))
    assert said(error) == ("InvalidArgument", grpc.StatusCode.INVALID_ARGUMENT, Reason.SELF_FOLLOW, {"user_id": str(a)})
    assert error.reason is Reason.SELF_FOLLOW
    assert await graph.is_following(a, a) is False
    await graph.unfollow(a, a)  # nothing to remove: idempotent
    with pytest.raises(ValueError, match="follower_id"):
        await graph.follow("5", b)
    with pytest.raises(ValueError, match="followee_id"):
        await graph.follow(a, 0)


async def test_lists_page_newest_first_with_tokens_bound_to_the_query(graph: Any, u: int) -> None:
    star = u
    followers = [u + i for i in range(1, 6)]
    for follower in followers:
        await graph.follow(follower, star)
    newest = followers[::-1]
    first = await graph.list_followers(star, page_size=2)
    assert of(first) == (newest[:2], False)
    assert [e.followed_at for e in first] == sorted((e.followed_at for e in first), reverse=True)
    second = await graph.list_followers(star, page_size=2, page_token=first.next_page_token)
    assert of(second) == (newest[2:4], False)
    assert of(await graph.list_followers(star, page_size=2, page_token=second.next_page_token)) == (newest[4:], True)
    assert of(await graph.list_followers(star, page_size=5)) == (newest, True)  # a full last page has no token
    assert of(await graph.list_followers(star)) == (newest, True)  # page_size 0: the default (50)
    assert await ids(graph.iter_followers(star, page_size=2, page_token=first.next_page_token)) == newest[2:]
    assert of(await graph.list_following(followers[0])) == ([star], True)
    foreign = await refusal(graph.list_following(star, page_token=first.next_page_token))
    assert said(foreign)[:3] == ("InvalidArgument", grpc.StatusCode.INVALID_ARGUMENT, Reason.INVALID_PAGE_TOKEN)
    token = first.next_page_token
    altered = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    forged = await refusal(graph.list_followers(star, page_token=altered))
    assert said(forged)[:3] == ("InvalidArgument", grpc.StatusCode.INVALID_ARGUMENT, Reason.INVALID_PAGE_TOKEN)
    with pytest.raises(ValueError, match="page_size"):
        await graph.list_followers(star, page_size=-1)


async def test_counts_match_the_edges(graph: Any, u: int) -> None:
    star, fan = u, u + 1
    for follower in (u + 2, u + 3, u + 4):
        await graph.follow(follower, star)
    await graph.follow(fan, star)
    await graph.follow(fan, u + 5)
    await graph.unfollow(u + 4, star)

    async def counts() -> list[tuple[int, int, int]]:
        """BatchGetCounts of three users, then GetCounts of the first. A batch is no snapshot: while
        the consumer is counting, it can read the star's 3 from before the fan's follow is counted
        and the fan's 2 from after, all final-looking; GetCounts read after that sees the star's
        4 until the unfollow is counted. Only the final state passes both."""
        batched = [(c.user_id - u, c.followers, c.following) for c in await graph.batch_get_counts([star, fan, u + 9])]
        one = await graph.get_counts(star)
        return [*batched, (one.user_id - u, one.followers, one.following)]

    assert await eventually(counts, lambda seen: seen == [(0, 3, 0), (1, 0, 2), (9, 0, 0), (0, 3, 0)], timeout=10) == [
        (0, 3, 0),
        (1, 0, 2),
        (9, 0, 0),
        (0, 3, 0),
    ]
    too_many = await refusal(graph.batch_get_counts(list(range(u, u + 101))))
    assert said(too_many) == (
        "InvalidArgument",
        grpc.StatusCode.INVALID_ARGUMENT,
        Reason.TOO_MANY_IDS,
        {"size": "101", "limit": "100"},
    )


async def test_a_block_removes_follows_both_ways_and_refuses_new_ones(graph: Any, u: int) -> None:
    a, b, c = u + 1, u + 2, u + 3
    await graph.follow(a, b)
    await graph.follow(b, a)
    await graph.set_privacy(c, True)
    assert await graph.follow(b, c) == FollowState.REQUESTED
    await graph.block(a, b)
    await graph.block(c, b)
    await graph.block(a, b)  # idempotent
    assert [await graph.is_following(a, b), await graph.is_following(b, a)] == [False, False]
    assert of(await graph.list_follow_requests(c)) == ([], True)
    (seen,) = await graph.get_relationships(a, [b])
    assert (seen.following, seen.followed_by, seen.blocking, seen.blocked_by) == (False, False, True, False)
    (other_side,) = await graph.get_relationships(b, [a])
    assert (other_side.blocking, other_side.blocked_by) == (False, True)
    for follower, followee in ((b, a), (a, b)):
        error = await refusal(graph.follow(follower, followee))
        assert said(error) == (
            "FailedPrecondition",
            grpc.StatusCode.FAILED_PRECONDITION,
            Reason.BLOCKED,
            {"follower_id": str(follower), "followee_id": str(followee)},
        )
        assert isinstance(error, FailedPrecondition)
    self_block = await refusal(graph.block(a, a))
    assert said(self_block) == (
        "InvalidArgument",
        grpc.StatusCode.INVALID_ARGUMENT,
        Reason.SELF_RELATION,
        {"user_id": str(a)},
    )
    await graph.unblock(a, b)
    assert await graph.is_following(b, a) is False  # an unblock restores nothing
    assert await graph.follow(b, a) == FollowState.FOLLOWING


async def test_private_accounts_turn_follows_into_requests(graph: Any, u: int) -> None:
    p, x, y, z, w = u, u + 1, u + 2, u + 3, u + 4
    await graph.set_privacy(p, True)
    assert await graph.follow(x, p) == FollowState.REQUESTED
    assert await graph.follow(x, p) == FollowState.REQUESTED
    assert await graph.follow(y, p) == FollowState.REQUESTED
    assert await graph.is_following(x, p) is False
    (rel,) = await graph.get_relationships(x, [p])
    assert (rel.following, rel.requested) == (False, True)
    (back,) = await graph.get_relationships(p, [x])
    assert back.requested_by is True
    assert of(await graph.list_follow_requests(p, page_size=1)) == ([y], False)
    assert await ids(graph.iter_follow_requests(p, page_size=1)) == [y, x]
    await graph.accept_follow_request(p, x)
    await graph.accept_follow_request(p, x)  # accepted already: idempotent
    assert await graph.is_following(x, p) is True
    await graph.reject_follow_request(p, y)
    await graph.reject_follow_request(p, y)
    missing = await refusal(graph.accept_follow_request(p, y))
    assert said(missing) == (
        "NotFound",
        grpc.StatusCode.NOT_FOUND,
        Reason.FOLLOW_REQUEST_NOT_FOUND,
        {"user_id": str(p), "requester_id": str(y)},
    )
    assert isinstance(missing, NotFound)
    assert await graph.follow(z, p) == FollowState.REQUESTED
    await graph.unfollow(z, p)  # withdraws the request
    assert await graph.follow(w, p) == FollowState.REQUESTED
    assert of(await graph.list_follow_requests(p)) == ([w], True)
    await graph.set_privacy(p, False)  # accepts what is pending
    assert [await graph.is_following(w, p), await graph.is_following(z, p)] == [True, False]
    assert sorted(await ids(graph.iter_followers(p))) == [x, w]
    assert of(await graph.list_follow_requests(p)) == ([], True)
    self_accept = await refusal(graph.accept_follow_request(p, p))
    assert said(self_accept)[:3] == ("InvalidArgument", grpc.StatusCode.INVALID_ARGUMENT, Reason.SELF_RELATION)


async def test_the_following_cap_counts_follows_and_requests(graph: Any, u: int) -> None:
    fan = u
    await graph.set_privacy(u + 1, True)
    for followee in range(u + 1, u + 1 + CAP):
        await graph.follow(fan, followee)
    assert await graph.follow(fan, u + 2) == FollowState.FOLLOWING  # a repeat at the cap
    over = await refusal(graph.follow(fan, u + 50))
    assert said(over) == (
        "FailedPrecondition",
        grpc.StatusCode.FAILED_PRECONDITION,
        Reason.FOLLOW_LIMIT,
        {"follower_id": str(fan), "cap": str(CAP)},
    )
    await graph.unfollow(fan, u + 1)  # the request
    assert await graph.follow(fan, u + 50) == FollowState.FOLLOWING


async def test_mutes_list_newest_first_and_touch_no_follow(graph: Any, u: int) -> None:
    a, b, c = u + 1, u + 2, u + 3
    await graph.follow(a, b)
    await graph.mute(a, b, duration=timedelta(hours=1), notifications=True)
    await graph.mute(a, c)
    assert await graph.is_following(a, b) is True
    first = await graph.list_mutes(a, page_size=1)
    assert [(m.user_id, m.expires_at, m.notifications) for m in first] == [(c, None, False)]
    (later,) = await graph.list_mutes(a, page_token=first.next_page_token)
    assert (later.user_id, later.notifications) == (b, True)
    assert later.expires_at is not None
    assert timedelta(minutes=59) < later.expires_at - later.muted_at <= timedelta(hours=1)
    flags = [(r.target_id, r.muting, r.muting_notifications) for r in await graph.get_relationships(a, [b, c, u + 4])]
    assert flags == [(b, True, True), (c, True, False), (u + 4, False, False)]
    negative = await refusal(graph.mute(a, u + 4, duration=timedelta(seconds=-5)))
    assert said(negative) == (
        "InvalidArgument",
        grpc.StatusCode.INVALID_ARGUMENT,
        Reason.INVALID_DURATION,
        {"field": "duration"},
    )
    assert said(await refusal(graph.mute(a, a)))[:3] == (
        "InvalidArgument",
        grpc.StatusCode.INVALID_ARGUMENT,
        Reason.SELF_RELATION,
    )
    await graph.unmute(a, c)
    await graph.unmute(a, c)
    assert await ids(graph.iter_mutes(a)) == [b]


async def test_known_and_mutual_followers_and_suggestions(graph: Any, u: int) -> None:
    me, friend, other, star = u + 1, u + 2, u + 3, u + 4
    await graph.follow(me, friend)
    await graph.follow(me, other)
    await graph.follow(friend, me)
    await graph.follow(friend, star)
    await graph.follow(other, star)
    await graph.follow(friend, u + 5)
    await graph.block(me, u + 5)
    assert await ids(graph.iter_known_followers(me, star)) == [other, friend]
    assert of(await graph.list_known_followers(me, star, page_size=1)) == ([other], False)
    mutual = await graph.list_mutual_follows(me)
    assert (mutual.items, mutual.last) == ([friend], True)
    assert [user async for user in graph.iter_mutual_follows(friend)] == [me]
    suggested = [(s.user_id, s.score, s.mutual_count) for s in await graph.suggest_follows(me)]
    assert suggested == [(star, 1.0, 2)]  # never one followed, the user, or one blocked
    limit = await refusal(graph.suggest_follows(me, limit=101))
    assert said(limit)[:3] == ("InvalidArgument", grpc.StatusCode.INVALID_ARGUMENT, Reason.INVALID_LIMIT)


async def test_remove_follower_drops_the_follow_without_blocking(graph: Any, u: int) -> None:
    a, b = u + 1, u + 2
    await graph.follow(b, a)
    await graph.remove_follower(a, b)
    await graph.remove_follower(a, b)
    assert await graph.is_following(b, a) is False
    assert await graph.follow(b, a) == FollowState.FOLLOWING
    assert said(await refusal(graph.remove_follower(a, a)))[:3] == (
        "InvalidArgument",
        grpc.StatusCode.INVALID_ARGUMENT,
        Reason.SELF_RELATION,
    )


# The doubles on their own.


@pytest.fixture
def shared() -> FakeGraph:
    return FakeGraph()


async def test_doubles_share_a_graph_and_its_page_tokens(shared: FakeGraph) -> None:
    blocking = FakeSocialGraphClient(shared)
    for follower in (2, 3, 4):
        blocking.follow(follower, 1)
    page = blocking.list_followers(1, page_size=2)
    async with FakeAsyncSocialGraphClient(shared) as other:
        assert await other.is_following(2, 1) is True
        assert await ids(other.iter_followers(1, page_token=page.next_page_token)) == [2]


async def test_doubles_take_and_check_the_per_call_options(shared: FakeGraph) -> None:
    """``timeout=``, ``metadata=`` and ``retry=`` are taken (and checked) as the real client does."""
    async with FakeAsyncSocialGraphClient(shared) as double:
        assert await double.follow(1, 2, timeout=1, metadata={"x-tenant": "t"}, retry=None) == FollowState.FOLLOWING
        with pytest.raises(ValueError, match="timeout"):
            await double.is_following(1, 2, timeout=0)
        with pytest.raises(ValueError, match="metadata"):
            await double.is_following(1, 2, metadata={"grpc-x": "y"})


async def test_what_the_doubles_do_not_model_is_unimplemented_and_a_closed_one_refuses() -> None:
    double = FakeSocialGraphClient()
    with pytest.raises(Unimplemented) as lifecycle:
        double.deactivate_account(1)
    assert lifecycle.value.code() is grpc.StatusCode.UNIMPLEMENTED
    with pytest.raises(Unimplemented):
        double.get_home_timeline(1)
    with pytest.raises(TypeError, match="FakeSocialGraphClient"):
        FakeSocialGraphClient.connect("localhost:50051")
    double.close()
    with pytest.raises(SocialGraphError) as closed:
        double.is_following(1, 2)
    assert closed.value.code() is grpc.StatusCode.CANCELLED
    assert isinstance(closed.value, grpc.RpcError)
