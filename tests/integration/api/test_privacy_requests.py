"""Private accounts and follow requests against the real servers.

A follow of a private account is a pending request: not an edge, not counted, not listed. Accept
turns it into one edge counted once (however often and however concurrently it is accepted),
Reject and Unfollow drop it, SetPrivacy(false) accepts every pending request before it returns.
Every check reads through the cached server and through ``truth`` (a server reading DynamoDB).

The tests share the module's tables and servers (``tests/support/shared_service.py``), each on user
IDs of its own: those with the counters consumer on tables with streams, the others on tables
without (where no consumer runs).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import cast

import grpc
import pytest
from redis.cluster import RedisCluster
from socialgraph.v1 import social_graph_pb2 as pb

from graph_service.cache import keys
from graph_service.domain.models import Direction
from graph_service.entrypoints.server import ServerRuntime
from graph_service.settings import Settings
from tests.support.graph_calls import (
    FLAGS,
    Stub,
    accept,
    all_counts,
    cache_client,
    counts,
    counts_of,
    error_info,
    follow,
    ids,
    is_following,
    reject,
    rejected,
    set_private,
    truth_stub,
    unfollow,
)
from tests.support.polling import eventually
from tests.support.runtimes import make_settings, running_counters, running_server, stub_for
from tests.support.shared_service import SharedService, module_fixtures, shared_service
from tests.support.tables import create_tables

pytestmark = pytest.mark.asyncio(loop_scope="module")  # the loop of the module's servers

REQUESTED = pb.FOLLOW_STATE_REQUESTED
FOLLOWING = pb.FOLLOW_STATE_FOLLOWING
Request = tuple[int, int]  # (requester user_id, requested_at in microseconds)


# -- the module's servers -----------------------------------------------------------------------


@dataclass(frozen=True)
class Service:
    shared: SharedService
    truth: Stub
    """A second server on the same tables with caching off."""


@contextlib.asynccontextmanager
async def module_service(dynamodb_local: str, redis_url: str, streams: bool) -> AsyncIterator[Service]:
    async with (
        shared_service(dynamodb_local, redis_url, streams=streams) as shared,
        truth_stub(shared.settings) as truth,
    ):
        yield Service(shared, truth)


module_redis, streamed, plain, service, user_ids, settings, counters = module_fixtures(
    module_service, lambda service: service.shared.settings
)
"""The module's services (``tests/support/shared_service.py``); ``settings``, ``counters`` and
``server``, ``stub`` and ``truth`` below are the parts of the test's, as the shared fixtures of the
same names would be for tables of the test's own."""


@pytest.fixture
def server(service: Service) -> ServerRuntime:
    return service.shared.server


@pytest.fixture
def stub(service: Service) -> Stub:
    return service.shared.stub


@pytest.fixture
def truth(service: Service) -> Stub:
    return service.truth


# -- calls --------------------------------------------------------------------------------------


def readers(stub: Stub, truth: Stub) -> dict[str, Stub]:
    """The cached server and the DynamoDB one: every key check runs on both."""
    return {"cached": stub, "truth": truth}


async def request_page(stub: Stub, user: int, page_size: int = 0, token: str = "") -> tuple[list[Request], str]:
    reply = await stub.ListFollowRequests(
        pb.ListFollowRequestsRequest(user_id=user, page_size=page_size, page_token=token)
    )
    return [(r.user_id, r.requested_at.ToMicroseconds()) for r in reply.requests], reply.next_page_token


async def request_pages(stub: Stub, user: int, page_size: int = 0) -> list[list[Request]]:
    """Every page of the user's incoming requests, first to last."""
    pages: list[list[Request]] = []
    token = ""
    while True:
        entries, token = await request_page(stub, user, page_size, token)
        pages.append(entries)
        if not token:
            return pages


async def requests_of(stub: Stub, user: int, page_size: int = 1000) -> list[Request]:
    return [entry for page in await request_pages(stub, user, page_size) for entry in page]


async def requesters(stub: Stub, user: int) -> list[int]:
    return [u for u, _ in await requests_of(stub, user)]


async def relation(stub: Stub, actor: int, target: int) -> dict[str, bool]:
    """GetRelationships of one target as {flag: value}."""
    reply = await stub.GetRelationships(pb.GetRelationshipsRequest(actor_id=actor, target_ids=[target]))
    assert [r.target_id for r in reply.relationships] == [target]
    found = reply.relationships[0]
    return {flag: getattr(found, flag) for flag in FLAGS}


def flags(**set_: bool) -> dict[str, bool]:
    """A relationship with the named flags set and every other flag clear."""
    assert set(set_) <= set(FLAGS)
    return {flag: set_.get(flag, False) for flag in FLAGS}


# -- checks -------------------------------------------------------------------------------------


async def assert_pending(reader: Stub, requester: int, user: int, name: str) -> None:
    """``requester`` has a pending request to ``user``: no edge anywhere, the request listed."""
    assert not await is_following(reader, (requester, user)), name
    assert requester not in await ids(reader, Direction.FOLLOWERS, user), name
    assert user not in await ids(reader, Direction.FOLLOWING, requester), name
    assert requester in await requesters(reader, user), name
    assert await relation(reader, requester, user) == flags(requested=True), name
    assert await relation(reader, user, requester) == flags(requested_by=True), name


async def assert_follows(reader: Stub, follower: int, user: int, name: str) -> None:
    """``follower`` follows ``user``: the edge in both lists, the request gone."""
    assert await is_following(reader, (follower, user)), name
    assert (await ids(reader, Direction.FOLLOWERS, user)).count(follower) == 1, name
    assert (await ids(reader, Direction.FOLLOWING, follower)).count(user) == 1, name
    assert follower not in await requesters(reader, user), name
    assert await relation(reader, follower, user) == flags(following=True), name
    assert await relation(reader, user, follower) == flags(followed_by=True), name


async def assert_unrelated(reader: Stub, a: int, b: int, name: str) -> None:
    """Neither an edge nor a request between ``a`` and ``b``, either way."""
    for x, y in ((a, b), (b, a)):
        assert not await is_following(reader, (x, y)), name
        assert x not in await ids(reader, Direction.FOLLOWERS, y), name
        assert x not in await requesters(reader, y), name
    assert await relation(reader, a, b) == flags(), name


async def settle(stub: Stub, marker: tuple[int, int]) -> None:
    """Make one more real follow and wait until it is counted: the consumer has read the stream
    past every earlier write, so counts read afterwards are final (not just not-yet-updated)."""
    follower, followee = marker
    assert await follow(stub, follower, followee) == FOLLOWING
    await eventually(lambda: counts(stub, followee), lambda c: c == (1, 0))


def now_us() -> int:
    return time.time_ns() // 1000


# -- 1. a follow of a private account is a request ----------------------------------------------


async def test_follow_of_private_account_is_a_request_not_an_edge_and_not_counted(
    stub: Stub, truth: Stub, counters: asyncio.Task[None]
) -> None:
    """Follow of a private account returns REQUESTED (again on repeat); it is listed as a request
    with its time, but is no follower, not followed, and counted nowhere once later follows are."""
    private, requester, public = 10, 11, 12
    await set_private(stub, private, True)
    # Cache the "nothing there" answers first, so a stale cache would show.
    assert not await is_following(stub, (requester, private))
    assert await ids(stub, Direction.FOLLOWERS, private) == []
    assert await relation(stub, requester, private) == flags()

    before = now_us()
    assert await follow(stub, requester, private) == REQUESTED
    after = now_us()
    first = await requests_of(stub, private)
    assert [u for u, _ in first] == [requester]
    assert before - 5_000_000 <= first[0][1] <= after + 5_000_000, "requested_at is not the time of the request"

    assert await follow(stub, requester, private) == REQUESTED
    for name, reader in readers(stub, truth).items():
        assert await requests_of(reader, private) == first, f"{name}: a repeat changed the request"
        await assert_pending(reader, requester, private, name)
        assert await ids(reader, Direction.FOLLOWING, requester) == [], name

    # Later real follows: once they are counted, the consumer has passed the request.
    assert await follow(stub, private, requester) == FOLLOWING  # the private account follows out
    assert await follow(stub, requester, public) == FOLLOWING
    want = {private: (0, 1), requester: (1, 1), public: (1, 0)}
    await eventually(lambda: all_counts(stub, list(want)), lambda c: c == want)
    assert await all_counts(truth, list(want)) == want


# -- 2. ListFollowRequests: order, paging, bound tokens -----------------------------------------


async def test_list_follow_requests_is_newest_first_paged_once_each_and_tokens_are_bound(
    stub: Stub, truth: Stub
) -> None:
    """Seven requests come newest first; pages of 3 (and 1, and 7) hold each exactly once with no
    empty non-last page; a token works on another server but not for another user or list."""
    private, other = 20, 21
    old_fans = [301, 302]
    for fan in old_fans:  # followers from before the account turned private: never requests
        assert await follow(stub, fan, private) == FOLLOWING
    await set_private(stub, private, True)
    await set_private(stub, other, True)
    asked = list(range(101, 108))
    for requester in asked:  # one at a time: the order of the calls is the order of the requests
        assert await follow(stub, requester, private) == REQUESTED
    for requester in (201, 202):
        assert await follow(stub, requester, other) == REQUESTED
    newest_first = asked[::-1]

    for name, reader in readers(stub, truth).items():
        pages = await request_pages(reader, private, 3)
        assert [len(p) for p in pages] == [3, 3, 1], name
        walked = [e for p in pages for e in p]
        assert [u for u, _ in walked] == newest_first, name
        times = [at for _, at in walked]
        assert times == sorted(times, reverse=True), name
        assert len(set(times)) == len(times), name
        assert all(at > 0 for at in times), name
        assert await request_pages(reader, private, 0) == [walked], f"{name}: default page"
        assert await request_pages(reader, private, 7) == [walked], f"{name}: an exact page ends the list"
        assert await request_pages(reader, private, 1) == [[e] for e in walked], name
        assert await requesters(reader, other) == [202, 201], name
        assert set(await ids(reader, Direction.FOLLOWERS, private)) == set(old_fans), name

    # A token of page 1 from the cached server continues on the DynamoDB one.
    page1, token = await request_page(stub, private, 3)
    page2, token = await request_page(truth, private, 3, token)
    page3, token = await request_page(stub, private, 3, token)
    assert token == ""
    assert [u for u, _ in page1 + page2 + page3] == newest_first

    # Bound to the user and to the list it came from.
    _, token = await request_page(stub, private, 3)
    assert token
    await rejected(request_page(stub, other, 3, token), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_PAGE_TOKEN")
    await rejected(request_page(truth, other, 3, token), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_PAGE_TOKEN")
    followers_reply = await stub.ListFollowers(pb.ListFollowersRequest(user_id=private, page_size=1))
    assert followers_reply.next_page_token
    await rejected(
        request_page(stub, private, 1, followers_reply.next_page_token),
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_PAGE_TOKEN",
    )
    await rejected(
        stub.ListFollowers(pb.ListFollowersRequest(user_id=private, page_size=3, page_token=token)),
        grpc.StatusCode.INVALID_ARGUMENT,
        "INVALID_PAGE_TOKEN",
    )
    await rejected(request_page(stub, private, -1), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_PAGE_SIZE")


# -- 3. accept ----------------------------------------------------------------------------------


async def test_accept_makes_one_counted_edge_even_accepted_twice_or_concurrently(
    settings: Settings, server: ServerRuntime, stub: Stub, truth: Stub, counters: asyncio.Task[None]
) -> None:
    """Accept makes the edge (both lists, IsFollowing, counted 1/1); a second Accept is OK; ten
    concurrent Accepts on two servers all succeed and the edge is still counted exactly once."""
    private, first, second = 30, 31, 32
    await set_private(stub, private, True)
    assert await follow(stub, first, private) == REQUESTED
    assert not await is_following(stub, (first, private))  # cached '0' that the accept must replace
    await accept(stub, private, first)
    await accept(stub, private, first)  # already accepted: still OK
    for name, reader in readers(stub, truth).items():
        await assert_follows(reader, first, private, name)
    want = {private: (1, 0), first: (0, 1)}
    await eventually(lambda: all_counts(stub, list(want)), lambda c: c == want)

    assert await follow(stub, second, private) == REQUESTED
    assert not await is_following(stub, (second, private))
    async with running_server(settings) as other_server:

        async def one_accept(port: int) -> None:
            async with stub_for(port) as own:  # a channel of its own: the calls really overlap
                await accept(own, private, second)

        ports = [server.port, other_server.port] * 5
        results = await asyncio.gather(*(one_accept(p) for p in ports), return_exceptions=True)
        assert [r for r in results if r is not None] == [], "a concurrent Accept failed"
        async with stub_for(other_server.port) as other_stub:
            await assert_follows(other_stub, second, private, "other cached server")

    for name, reader in readers(stub, truth).items():
        await assert_follows(reader, second, private, name)
        assert await ids(reader, Direction.FOLLOWERS, private) == [second, first], name
        assert await requests_of(reader, private) == [], name
    want = {private: (2, 0), first: (0, 1), second: (0, 1)}
    await eventually(lambda: all_counts(stub, list(want)), lambda c: c == want)
    await settle(stub, (38, 39))
    assert await all_counts(stub, list(want)) == want
    assert await all_counts(truth, list(want)) == want


# -- 4. accept of nothing -----------------------------------------------------------------------


async def test_accept_without_a_request_or_follow_is_follow_request_not_found(stub: Stub, truth: Stub) -> None:
    """Accept of a request that never existed, was rejected or was withdrawn is NOT_FOUND
    (FOLLOW_REQUEST_NOT_FOUND) and makes nothing; accepting an existing follower is OK."""
    private, public, stranger, rejected_one, withdrawn, old_fan = 40, 41, 42, 43, 44, 45
    not_found = (grpc.StatusCode.NOT_FOUND, "FOLLOW_REQUEST_NOT_FOUND")
    assert await follow(stub, old_fan, private) == FOLLOWING
    await set_private(stub, private, True)
    for name, reader in readers(stub, truth).items():
        await rejected(accept(reader, private, stranger), *not_found)
        await rejected(accept(reader, public, stranger), *not_found)
        await rejected(accept(reader, stranger, private), *not_found)  # the other direction
        await rejected(accept(reader, private, private), grpc.StatusCode.INVALID_ARGUMENT, "SELF_RELATION")
        await accept(reader, private, old_fan)  # a follow already there: OK, nothing changes
        assert await ids(reader, Direction.FOLLOWERS, private) == [old_fan], name

    assert await follow(stub, rejected_one, private) == REQUESTED
    await reject(stub, private, rejected_one)
    assert await follow(stub, withdrawn, private) == REQUESTED
    await unfollow(stub, withdrawn, private)
    for name, reader in readers(stub, truth).items():
        await rejected(accept(reader, private, rejected_one), *not_found)
        await rejected(accept(reader, private, withdrawn), *not_found)
        for user in (stranger, rejected_one, withdrawn):
            await assert_unrelated(reader, user, private, name)
        await assert_unrelated(reader, stranger, public, name)


# -- 5. reject ----------------------------------------------------------------------------------


async def test_reject_drops_the_request_idempotently_and_a_later_follow_asks_again(
    stub: Stub, truth: Stub, counters: asyncio.Task[None]
) -> None:
    """Reject drops the request (not listed, no edge, relationships clear), twice is OK, a reject of
    nothing is OK; a later Follow makes a new, newer request."""
    private, requester, bystander = 50, 51, 52
    await set_private(stub, private, True)
    assert await follow(stub, requester, private) == REQUESTED
    assert await follow(stub, bystander, private) == REQUESTED
    [(_, first_at)] = [e for e in await requests_of(stub, private) if e[0] == requester]
    await assert_pending(stub, requester, private, "cached")  # caches the pending relationship
    await reject(stub, private, requester)
    await reject(stub, private, requester)
    await reject(stub, private, 59)  # never asked: still OK
    for name, reader in readers(stub, truth).items():
        await assert_unrelated(reader, requester, private, name)
        assert await requesters(reader, private) == [bystander], name

    assert await follow(stub, requester, private) == REQUESTED
    for name, reader in readers(stub, truth).items():
        await assert_pending(reader, requester, private, name)
        found = await requests_of(reader, private)
        assert [u for u, _ in found] == [requester, bystander], name
        assert found[0][1] > first_at, f"{name}: the new request kept the old time"
    await settle(stub, (58, 57))
    assert await all_counts(stub, [private, requester]) == {private: (0, 0), requester: (0, 0)}


# -- 6. unfollow withdraws ----------------------------------------------------------------------


async def test_unfollow_withdraws_a_pending_request(stub: Stub, truth: Stub) -> None:
    """Unfollow of a pending request removes it (not listed, requested=false on both sides), twice is OK."""
    private, requester, other = 60, 61, 62
    await set_private(stub, private, True)
    assert await follow(stub, requester, private) == REQUESTED
    assert await follow(stub, other, private) == REQUESTED
    await assert_pending(stub, requester, private, "cached")  # the cache now holds requested=true
    await unfollow(stub, requester, private)
    await unfollow(stub, requester, private)
    for name, reader in readers(stub, truth).items():
        await assert_unrelated(reader, requester, private, name)
        assert await relation(reader, requester, private) == flags(), name
        assert await relation(reader, private, requester) == flags(), name
        assert await requesters(reader, private) == [other], name
        await assert_pending(reader, other, private, name)


# -- 7. accept racing withdraw ------------------------------------------------------------------


async def test_accept_racing_withdraw_or_reject_leaves_an_edge_counted_once_or_nothing(
    settings: Settings, server: ServerRuntime, stub: Stub, truth: Stub, counters: asyncio.Task[None]
) -> None:
    """Accept racing Unfollow (4 pairs) or Reject (4 pairs) of one request, on two servers in both
    call orders: each pair ends with an edge and no request, or with neither; the caches agree with
    DynamoDB and the counts equal the true edge counts."""
    privates = [701, 702, 703, 704]
    # Each race varies by index modulo 2 (which server accepts) and 4 (which call goes first): four
    # withdrawn and four rejected pairs take each combination once (20 pairs repeated them).
    pairs = [(711 + i, privates[i % len(privates)]) for i in range(8)]
    rejected_pairs = set(pairs[4:])  # the rest are withdrawn
    users = privates + [r for r, _ in pairs]
    for user in privates:
        await set_private(stub, user, True)

    async def ask(requester: int, user: int) -> None:
        assert await follow(stub, requester, user) == REQUESTED
        await assert_pending(stub, requester, user, "cached")  # warm every entry the race may leave stale

    await asyncio.gather(*(ask(r, u) for r, u in pairs))
    outcomes: list[object] = []
    not_found = (grpc.StatusCode.NOT_FOUND, "FOLLOW_REQUEST_NOT_FOUND")  # the withdraw or reject won

    async with running_server(settings) as other_server:

        async def accept_call(port: int, requester: int, user: int) -> None:
            async with stub_for(port) as own:
                try:
                    await accept(own, user, requester)
                except grpc.aio.AioRpcError as error:
                    outcomes.append((error.code(), error_info(error).reason))
                else:
                    outcomes.append("accepted")

        async def drop_call(port: int, requester: int, user: int) -> None:
            async with stub_for(port) as own:
                if (requester, user) in rejected_pairs:
                    await reject(own, user, requester)
                else:
                    await unfollow(own, requester, user)

        async def race(index: int, requester: int, user: int) -> None:
            ports = [server.port, other_server.port]
            if index % 2:
                ports.reverse()
            calls = [accept_call(ports[0], requester, user), drop_call(ports[1], requester, user)]
            if index % 4 >= 2:
                calls.reverse()
            await asyncio.gather(*calls)

        await asyncio.gather(*(race(i, r, u) for i, (r, u) in enumerate(pairs)))
    assert len(outcomes) == len(pairs)
    assert set(outcomes) <= {"accepted", not_found}, outcomes

    edges = {pair for pair in pairs if await is_following(truth, pair)}
    assert edges <= rejected_pairs, "an Unfollow returned but its edge is still there"
    for name, reader in readers(stub, truth).items():
        for user in privates:
            assert await requests_of(reader, user) == [], f"{name}: a request outlived the race"
        await asyncio.gather(
            *(
                (assert_follows if (r, u) in edges else assert_unrelated)(reader, r, u, f"{name}: {r} -> {u}")
                for r, u in pairs
            )
        )
    want = counts_of(edges, users)
    await eventually(lambda: all_counts(stub, users), lambda c: c == want)
    await settle(stub, (798, 799))
    assert await all_counts(stub, users) == want
    assert await all_counts(truth, users) == want


# -- 8. SetPrivacy ------------------------------------------------------------------------------


@pytest.fixture
def small_sweeps(monkeypatch: pytest.MonkeyPatch) -> None:
    """SetPrivacy(false) accepts pending requests 10 at a time (100 in production), so a sweep of
    several batches needs tens of requests, not hundreds (the servers here run in this process)."""
    monkeypatch.setattr("graph_service.rules.requests.SWEEP_BATCH", 10)


async def test_set_privacy_public_accepts_every_pending_request_and_private_keeps_followers(
    stub: Stub, truth: Stub, counters: asyncio.Task[None], small_sweeps: None
) -> None:
    """SetPrivacy(false) with 25 pending requests (three sweep batches) makes them all followers
    before it returns, counted; SetPrivacy(true) keeps every follower; both idempotent."""
    user, old_fan = 800, 801
    asked = list(range(1001, 1026))
    assert await follow(stub, old_fan, user) == FOLLOWING
    await set_private(stub, user, True)
    await set_private(stub, user, True)
    assert await follow(stub, old_fan, user) == FOLLOWING  # an existing follower stays one
    for start in range(0, len(asked), 25):
        states = await asyncio.gather(*(follow(stub, r, user) for r in asked[start : start + 25]))
        assert set(states) == {REQUESTED}
    assert sorted(await requesters(truth, user)) == asked
    for requester in asked[:10]:
        assert not await is_following(stub, (requester, user))  # cached '0'
    assert await ids(stub, Direction.FOLLOWERS, user) == [old_fan]  # cached list

    await set_private(stub, user, False)
    everyone = {old_fan, *asked}
    for name, reader in readers(stub, truth).items():
        assert await requests_of(reader, user) == [], name
        assert set(await ids(reader, Direction.FOLLOWERS, user)) == everyone, name
        assert len(await ids(reader, Direction.FOLLOWERS, user, 7)) == len(everyone), name
        for requester in asked[:10] + asked[-5:]:
            assert await is_following(reader, (requester, user)), name
            assert await relation(reader, requester, user) == flags(following=True), name
    await eventually(lambda: counts(stub, user), lambda c: c == (len(everyone), 0))

    await set_private(stub, user, False)  # idempotent: nothing changes
    assert await follow(stub, 1200, user) == FOLLOWING
    everyone.add(1200)
    await set_private(stub, user, True)
    await set_private(stub, user, True)
    assert await follow(stub, 1201, user) == REQUESTED
    assert await follow(stub, asked[0], user) == FOLLOWING  # a follower's repeat stays FOLLOWING
    for name, reader in readers(stub, truth).items():
        assert set(await ids(reader, Direction.FOLLOWERS, user)) == everyone, f"{name}: going private lost a follower"
        assert await is_following(reader, (old_fan, user)), name
        assert await requesters(reader, user) == [1201], name
    await settle(stub, (898, 899))
    sample = [user, old_fan, *asked[:5], 1200, 1201]
    want = {u: (len(everyone), 0) if u == user else (0, 0) if u == 1201 else (0, 1) for u in sample}
    assert await all_counts(stub, sample) == want
    assert await all_counts(truth, sample) == want


# -- 9. privacy flips racing follows ------------------------------------------------------------


async def test_privacy_flips_racing_follows_strand_no_request(
    settings: Settings, server: ServerRuntime, stub: Stub, truth: Stub, counters: asyncio.Task[None]
) -> None:
    """While one client flips SetPrivacy true/false 20 times, 16 accounts follow (some twice) via two
    cached servers; after a final SetPrivacy(false) every one of them follows, counted, and no
    request is left pending."""
    user = 900
    # Four clients of four fans each, two per server, and the flipper never stops before they are
    # done: every follow still races a flip (40 fans and 30 flips only repeated that).
    fans = list(range(901, 917))
    states: list[int] = []
    async with running_server(settings) as other_server:
        stop = asyncio.Event()

        async def flipper() -> int:
            flips = 0
            async with stub_for(server.port) as own:
                while flips < 20 or not stop.is_set():
                    await set_private(own, user, flips % 2 == 0)
                    flips += 1
            return flips

        async def fans_on(port: int, group: Sequence[int]) -> None:
            async with stub_for(port) as own:
                for fan in group:
                    states.append(await follow(own, fan, user))
                    if fan % 3 == 0:
                        states.append(await follow(own, fan, user))

        flipping = asyncio.create_task(flipper())
        try:
            ports = [server.port, other_server.port]
            await asyncio.gather(*(fans_on(ports[i % 2], fans[i::4]) for i in range(4)))
        finally:
            stop.set()
            flips = await flipping
        assert flips >= 20
        assert set(states) <= {FOLLOWING, REQUESTED}, states

        await set_private(stub, user, False)
        async with stub_for(other_server.port) as other_stub:
            every = {**readers(stub, truth), "other cached": other_stub}
            for name, reader in every.items():
                assert await requests_of(reader, user) == [], f"{name}: a request was stranded"
                assert sorted(await ids(reader, Direction.FOLLOWERS, user)) == fans, name
                for fan in fans:
                    assert await is_following(reader, (fan, user)), f"{name}: {fan}"
                    assert await relation(reader, fan, user) == flags(following=True), f"{name}: {fan}"
            # The account is public now on every server: a new follow is an edge at once.
            assert await follow(other_stub, 999, user) == FOLLOWING
    want = {user: (len(fans) + 1, 0), **{fan: (0, 1) for fan in fans}}
    await eventually(lambda: all_counts(stub, list(want)), lambda c: c == want)
    await settle(stub, (998, 997))
    assert await all_counts(truth, list(want)) == want


async def test_a_sweep_overtaken_by_set_privacy_private_accepts_no_later_request(
    stub: Stub, truth: Stub, server: ServerRuntime, small_sweeps: None
) -> None:
    """SetPrivacy(false) sweeping many requests, then SetPrivacy(true) returns while the sweep still
    runs, then a new follower asks: that new request is never accepted by the older sweep."""
    user, late = 1400, 1999
    askers = list(range(1401, 1501))  # ten sweep pages
    await set_private(stub, user, True)
    for start in range(0, len(askers), 50):
        await asyncio.gather(*(follow(stub, a, user) for a in askers[start : start + 50]))
    async with stub_for(server.port) as sweeper:
        sweep = asyncio.create_task(set_private(sweeper, user, False))
        await eventually(lambda: ids(truth, Direction.FOLLOWERS, user), lambda got: len(got) > 0, interval=0.005)
        await set_private(stub, user, True)
        assert not sweep.done(), "the sweep ended before SetPrivacy(true): the race this test is about did not happen"
        assert await follow(stub, late, user) == REQUESTED
        await sweep
    for name, reader in readers(stub, truth).items():
        await assert_pending(reader, late, user, name)
    accepted = set(await ids(truth, Direction.FOLLOWERS, user))
    pending = set(await requesters(truth, user))
    assert accepted | pending == {*askers, late}  # each asker exactly once: a follower or still asking
    assert not accepted & pending


# -- 10. relationships --------------------------------------------------------------------------


async def test_get_relationships_shows_requested_and_requested_by_on_both_sides(stub: Stub, truth: Stub) -> None:
    """Requests show as requested (the asker's view) and requested_by (the asked one's view), also when
    two private accounts ask each other, and change to following/followed_by as they are accepted."""
    a, b, c = 70, 71, 72  # a and b private, c public
    await set_private(stub, a, True)
    await set_private(stub, b, True)
    for actor, target in ((a, b), (b, a), (a, c), (c, a)):
        assert await relation(stub, actor, target) == flags()  # cache the empty relationships

    assert await follow(stub, a, b) == REQUESTED
    assert await follow(stub, b, a) == REQUESTED
    assert await follow(stub, c, a) == REQUESTED
    for name, reader in readers(stub, truth).items():
        assert await relation(reader, a, b) == flags(requested=True, requested_by=True), name
        assert await relation(reader, b, a) == flags(requested=True, requested_by=True), name
        assert await relation(reader, a, c) == flags(requested_by=True), name
        assert await relation(reader, c, a) == flags(requested=True), name
        reply = await reader.GetRelationships(pb.GetRelationshipsRequest(actor_id=a, target_ids=[b, a, c, b]))
        assert [r.target_id for r in reply.relationships] == [b, a, c, b], name
        assert [r.requested_by for r in reply.relationships] == [True, False, True, True], name
        assert [r.requested for r in reply.relationships] == [True, False, False, True], name

    await accept(stub, a, b)  # b now follows a; a's own request to b is still pending
    for name, reader in readers(stub, truth).items():
        assert await relation(reader, a, b) == flags(requested=True, followed_by=True), name
        assert await relation(reader, b, a) == flags(following=True, requested_by=True), name
        assert await requesters(reader, a) == [c], name
        assert await requesters(reader, b) == [a], name

    await reject(stub, b, a)
    await accept(stub, a, c)
    for name, reader in readers(stub, truth).items():
        assert await relation(reader, a, b) == flags(followed_by=True), name
        assert await relation(reader, b, a) == flags(following=True), name
        assert await relation(reader, a, c) == flags(followed_by=True), name
        assert await relation(reader, c, a) == flags(following=True), name


# -- 11. read-your-writes through the cache -----------------------------------------------------


async def test_cached_reads_see_accept_reject_withdraw_and_sweep_at_once(
    settings: Settings, server: ServerRuntime, stub: Stub, truth: Stub
) -> None:
    """With '0' and the old lists and relationships cached, each of Accept, Reject, Unfollow and
    SetPrivacy(false) is seen by the very next cached read, as DynamoDB has it."""
    private = 80
    accepted, refused, withdrawn, swept = 81, 82, 83, 84
    asked = [accepted, refused, withdrawn, swept]
    await set_private(stub, private, True)
    for requester in asked:
        assert await follow(stub, requester, private) == REQUESTED
        await assert_pending(stub, requester, private, "cached")  # fills state, lists, relationships
    assert await ids(stub, Direction.FOLLOWERS, private) == []
    client = cache_client(settings)
    try:
        for requester in asked:
            assert await client.get(keys.follow_state(requester, private)) == "0", "IsFollowing was not cached"
    finally:
        await client.aclose()
    assert server.cache is not None
    hits = server.cache.hits
    assert not await is_following(stub, (accepted, private))
    assert server.cache.hits > hits, "the repeat read was not served by the cache"

    await accept(stub, private, accepted)
    assert await is_following(stub, (accepted, private))
    await assert_follows(stub, accepted, private, "cached after accept")

    await reject(stub, private, refused)
    assert await relation(stub, refused, private) == flags()
    await assert_unrelated(stub, refused, private, "cached after reject")

    await unfollow(stub, withdrawn, private)
    assert await relation(stub, private, withdrawn) == flags()
    await assert_unrelated(stub, withdrawn, private, "cached after withdraw")

    await set_private(stub, private, False)
    assert await is_following(stub, (swept, private))
    await assert_follows(stub, swept, private, "cached after the sweep")

    for name, reader in readers(stub, truth).items():
        assert await ids(reader, Direction.FOLLOWERS, private) == [swept, accepted], name
        assert await requests_of(reader, private) == [], name
        for requester in asked:
            want = requester in (accepted, swept)
            assert await is_following(reader, (requester, private)) == want, f"{name}: {requester}"


# -- on a Redis Cluster -------------------------------------------------------------------------


async def cached_after_read(cluster: RedisCluster, read: Callable[[], Awaitable[object]], key: str, want: str) -> None:
    """Read through the server until the cluster holds ``want`` at ``key``: a fill is refused while
    the counters consumer still bumps the users' epochs for the same writes."""

    async def probe() -> str | None:
        await read()
        return cast("str | None", cluster.get(key))

    await eventually(probe, lambda value: value == want)


@pytest.mark.cluster
async def test_request_accept_and_relationships_on_a_redis_cluster(
    dynamodb_local: str, redis_cluster: list[int], flushed_cluster: RedisCluster
) -> None:
    """On the 3-master cluster (the two accounts' keys on different masters): request, accept and
    GetRelationships answer right through the cache, and the cache really holds their entries."""
    settings = make_settings(dynamodb_local, f"redis://127.0.0.1:{redis_cluster[0]}/0", redis_cluster=True)
    await create_tables(settings, streams=True)

    def node(user: int) -> int:
        return int(flushed_cluster.get_node_from_key(keys.epoch(user)).port)

    private = 1
    requester = next(u for u in range(2, 100) if node(u) != node(private))
    async with (
        running_server(settings) as server,
        stub_for(server.port) as stub,
        truth_stub(settings) as truth,
        running_counters(settings),
    ):
        await set_private(stub, private, True)
        assert await relation(stub, requester, private) == flags()
        assert await follow(stub, requester, private) == REQUESTED
        for name, reader in readers(stub, truth).items():
            await assert_pending(reader, requester, private, name)
        # The consumer drops relationship entries as it reads the request from the stream: a read
        # after that fills them again, in the actor's slot on its own master.
        for actor, target, value in ((requester, private, "001000"), (private, requester, "000100")):
            read = functools.partial(relation, stub, actor, target)
            await cached_after_read(flushed_cluster, read, keys.relationship(actor, target), value)
        read = functools.partial(is_following, stub, (requester, private))
        await cached_after_read(flushed_cluster, read, keys.follow_state(requester, private), "0")

        await accept(stub, private, requester)
        for name, reader in readers(stub, truth).items():
            await assert_follows(reader, requester, private, name)
        for actor, target, value in ((requester, private, "100000"), (private, requester, "010000")):
            read = functools.partial(relation, stub, actor, target)
            await cached_after_read(flushed_cluster, read, keys.relationship(actor, target), value)
        read = functools.partial(is_following, stub, (requester, private))
        await cached_after_read(flushed_cluster, read, keys.follow_state(requester, private), "1")
        want = {private: (1, 0), requester: (0, 1)}
        await eventually(lambda: all_counts(stub, list(want)), lambda c: c == want)
        assert await all_counts(truth, list(want)) == want

        cache = server.cache
        assert cache is not None

        async def hits_of_two_reads() -> int:
            hits = cache.hits
            assert await relation(stub, requester, private) == flags(following=True)
            assert await is_following(stub, (requester, private))
            return cache.hits - hits

        await eventually(hits_of_two_reads, lambda hits: hits == 2)  # both served by the cluster
