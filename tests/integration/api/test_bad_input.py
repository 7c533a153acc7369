"""Bad input is refused with the right status and ``google.rpc.ErrorInfo``, and never changes the graph.

Most tests share one small graph, built once for the module (the refused calls must leave it exactly
as it was): after every test, every item of its tables is compared with those stored when it was
built (``tests/support/table_items.py``), and at the end of the module what callers read with the
snapshot taken then. The few tests that need a counters consumer, or a server on empty tables, get
tables and a server of their own. They come first in the module, so that they are done before the
shared graph is built: each flushes the Redis that graph's server caches in, and runs in an event
loop of its own, while the module's loop, which runs that server, would stand still (its cache lease
lapsing).
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import grpc
import pytest
import pytest_asyncio
import redis
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph_devstack.processes import ManagedProcess

from graph_service.settings import Settings
from tests.support.graph_calls import error_info, rejected
from tests.support.polling import eventually
from tests.support.runtimes import make_settings, running_server, stub_for
from tests.support.servers import trust_as_reset
from tests.support.table_items import Items, differences, stored_items
from tests.support.tables import create_tables, drop_tables

if TYPE_CHECKING:
    # The async stub type exists only for type checkers; at run time the stub is the generated class.
    from socialgraph.v1.social_graph_pb2_grpc import SocialGraphServiceAsyncStub as Stub

MAX_ID = 2**64 - 1
INVALID = grpc.StatusCode.INVALID_ARGUMENT

# A small graph: 1 -> 2, 3 -> 2, 4 -> 2, 2 -> 5, 2 -> 6, 1 -> 5, 6 -> 1.
EDGES = [(1, 2), (3, 2), (4, 2), (2, 5), (2, 6), (1, 5), (6, 1)]
USERS = range(1, 8)  # 7 has no edges at all


async def walk(page: Callable[[str], Awaitable[tuple[list[int], str]]]) -> list[int]:
    """Every user ID of a list, page by page, from the first page to the one with an empty token."""
    ids: list[int] = []
    token = ""
    while True:
        entries, token = await page(token)
        ids.extend(entries)
        if not token:
            return ids


async def followers_of(stub: Stub, user_id: int, page_size: int = 2) -> list[int]:
    async def page(token: str) -> tuple[list[int], str]:
        reply = await stub.ListFollowers(
            pb.ListFollowersRequest(user_id=user_id, page_size=page_size, page_token=token)
        )
        return [e.user_id for e in reply.followers], reply.next_page_token

    return await walk(page)


async def following_of(stub: Stub, user_id: int, page_size: int = 2) -> list[int]:
    async def page(token: str) -> tuple[list[int], str]:
        reply = await stub.ListFollowing(
            pb.ListFollowingRequest(user_id=user_id, page_size=page_size, page_token=token)
        )
        return [e.user_id for e in reply.following], reply.next_page_token

    return await walk(page)


@dataclass(frozen=True)
class Snapshot:
    followers: dict[int, list[int]]
    following: dict[int, list[int]]
    is_following: dict[tuple[int, int], bool]
    counts: dict[int, tuple[int, int]]


async def snapshot(stub: Stub) -> Snapshot:
    """Everything a caller can read about the users of the test graph."""
    pairs = [(a, b) for a in USERS for b in USERS if a != b]
    states = await asyncio.gather(
        *(stub.IsFollowing(pb.IsFollowingRequest(follower_id=a, followee_id=b)) for a, b in pairs)
    )
    counts = await stub.BatchGetCounts(pb.BatchGetCountsRequest(user_ids=list(USERS)))
    followers = await asyncio.gather(*(followers_of(stub, u) for u in USERS))
    following = await asyncio.gather(*(following_of(stub, u) for u in USERS))
    return Snapshot(
        followers=dict(zip(USERS, followers, strict=True)),
        following=dict(zip(USERS, following, strict=True)),
        is_following={pair: reply.following for pair, reply in zip(pairs, states, strict=True)},
        counts={c.user_id: (c.followers_count, c.following_count) for c in counts.counts},
    )


def expected_counts() -> dict[int, tuple[int, int]]:
    return {u: (sum(1 for _, b in EDGES if b == u), sum(1 for a, _ in EDGES if a == u)) for u in USERS}


@dataclass(frozen=True)
class Tokens:
    """Real page tokens, each from a list with more entries than one page."""

    followers_of_2: str  # ListFollowers(2, page_size=1)
    followers_of_5: str  # ListFollowers(5, page_size=1)
    following_of_2: str  # ListFollowing(2, page_size=1)


@dataclass(frozen=True)
class Graph:
    stub: Stub
    before: Snapshot
    tokens: Tokens


async def build_graph(stub: Stub, counted: bool) -> Graph:
    """Make the test graph, wait for its counts (all 0 when no counters consumer runs), take a snapshot and tokens."""
    for follower, followee in EDGES:
        await stub.Follow(pb.FollowRequest(follower_id=follower, followee_id=followee))
    counts = expected_counts() if counted else dict.fromkeys(USERS, (0, 0))
    await eventually(
        lambda: stub.BatchGetCounts(pb.BatchGetCountsRequest(user_ids=list(USERS))),
        lambda r: {c.user_id: (c.followers_count, c.following_count) for c in r.counts} == counts,
    )
    before = await snapshot(stub)
    assert before.followers[2] == [4, 3, 1]
    assert before.following[2] == [6, 5]
    assert before.counts == counts
    tokens = Tokens(
        followers_of_2=(await stub.ListFollowers(pb.ListFollowersRequest(user_id=2, page_size=1))).next_page_token,
        followers_of_5=(await stub.ListFollowers(pb.ListFollowersRequest(user_id=5, page_size=1))).next_page_token,
        following_of_2=(await stub.ListFollowing(pb.ListFollowingRequest(user_id=2, page_size=1))).next_page_token,
    )
    assert all([tokens.followers_of_2, tokens.followers_of_5, tokens.following_of_2])
    return Graph(stub, before, tokens)


@pytest.fixture
async def counted_graph(stub: Stub, counters: asyncio.Task[None]) -> AsyncIterator[Graph]:
    """The small test graph with the counters consumer running and its counts settled; checked unchanged after."""
    value = await build_graph(stub, counted=True)
    yield value
    assert await snapshot(stub) == value.before, "a refused call changed what callers can read"


@dataclass(frozen=True)
class World:
    graph: Graph
    settings: Settings
    items: Items  # every item of its tables, as the build left them


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(dynamodb_local: str, redis_node: ManagedProcess) -> AsyncIterator[World]:
    """The small test graph (no counters consumer), built once for the module on tables of its own,
    with a flushed Redis whose cache is trusted (as ``redis_url`` leaves it); when the module ends,
    callers must still read exactly what they read after the build."""
    client = redis.Redis(port=redis_node.port)
    client.flushall()
    trust_as_reset(client)
    client.close()
    settings = make_settings(dynamodb_local, f"redis://127.0.0.1:{redis_node.port}/0")
    await create_tables(settings, streams=False)
    try:
        async with running_server(settings) as server, stub_for(server.port) as generated:
            stub = cast("Stub", generated)  # the async type of the generated class (see the imports)
            value = await build_graph(stub, counted=False)
            yield World(value, settings, await stored_items(settings))
            assert await snapshot(stub) == value.before, "a refused call changed what callers can read"
    finally:
        await drop_tables(settings)


@pytest_asyncio.fixture(loop_scope="module")
async def graph(world: World) -> AsyncIterator[Graph]:
    """The module's test graph; after the test, every item of its tables must be as the build left it
    (what callers read, through the cache, is compared when the module ends)."""
    yield world.graph
    changed = differences(world.items, await stored_items(world.settings))
    assert not changed, f"a refused call changed the graph: {changed}"


on_the_graph = pytest.mark.asyncio(loop_scope="module")
"""The mark of every test of the shared graph: it runs in the module's event loop, as its server does."""


# -- counts, extremes and metadata: tables and a server of their own (first: see the docstring) ----
# (The refused calls of the first test are those of the sections below.)


async def test_refused_calls_never_change_the_counts(counted_graph: Graph) -> None:
    """Every kind of refused call, with the counters consumer running, leaves all counts as they were."""
    stub = counted_graph.stub
    for _, call, _ in ZERO_ID_CALLS:
        await rejected(call(stub), INVALID, "INVALID_USER_ID")
    for user in USERS:
        await rejected(stub.Follow(pb.FollowRequest(follower_id=user, followee_id=user)), INVALID, "SELF_FOLLOW")
    for make in BAD_TOKENS:
        request = pb.ListFollowersRequest(user_id=2, page_token=make(counted_graph.tokens))
        await rejected(stub.ListFollowers(request), INVALID, "INVALID_PAGE_TOKEN")
    await rejected(stub.ListFollowers(pb.ListFollowersRequest(user_id=2, page_size=-1)), INVALID, "INVALID_PAGE_SIZE")
    await rejected(stub.BatchGetCounts(pb.BatchGetCountsRequest(user_ids=list(range(1, 102)))), INVALID, "TOO_MANY_IDS")
    # A marker write after the refusals: once the consumer has counted it (and its undo), it has
    # also seen anything the refused calls might have written before it.
    await stub.Follow(pb.FollowRequest(follower_id=7, followee_id=3))
    await eventually(lambda: stub.GetCounts(pb.GetCountsRequest(user_id=3)), lambda r: r.followers_count == 1)
    await stub.Unfollow(pb.UnfollowRequest(follower_id=7, followee_id=3))
    await eventually(lambda: stub.GetCounts(pb.GetCountsRequest(user_id=7)), lambda r: r.following_count == 0)
    await eventually(lambda: stub.GetCounts(pb.GetCountsRequest(user_id=3)), lambda r: r.followers_count == 0)
    assert (await snapshot(stub)).counts == expected_counts()


async def test_batch_get_counts_keeps_request_order_and_duplicates(counted_graph: Graph) -> None:
    """BatchGetCounts answers one row per requested ID, in request order, duplicates included."""
    wanted = [5, 2, 5, 99, 2, 1, 7, 5]
    reply = await counted_graph.stub.BatchGetCounts(pb.BatchGetCountsRequest(user_ids=wanted))
    assert [c.user_id for c in reply.counts] == wanted
    expected = {**expected_counts(), 99: (0, 0)}
    assert [(c.followers_count, c.following_count) for c in reply.counts] == [expected[u] for u in wanted]


async def test_largest_user_id_round_trips(stub: Stub, counters: asyncio.Task[None]) -> None:
    """The largest uint64 user ID can follow and be followed, is listed, paged and counted, and can unfollow."""
    await stub.Follow(pb.FollowRequest(follower_id=MAX_ID, followee_id=7))
    await stub.Follow(pb.FollowRequest(follower_id=MAX_ID - 1, followee_id=7))
    await stub.Follow(pb.FollowRequest(follower_id=7, followee_id=MAX_ID))
    await stub.Follow(pb.FollowRequest(follower_id=1, followee_id=MAX_ID))
    assert (await stub.IsFollowing(pb.IsFollowingRequest(follower_id=MAX_ID, followee_id=7))).following
    assert (await stub.IsFollowing(pb.IsFollowingRequest(follower_id=7, followee_id=MAX_ID))).following
    assert not (await stub.IsFollowing(pb.IsFollowingRequest(follower_id=MAX_ID, followee_id=1))).following

    first = await stub.ListFollowers(pb.ListFollowersRequest(user_id=7, page_size=1))
    assert [e.user_id for e in first.followers] == [MAX_ID - 1]
    second = await stub.ListFollowers(pb.ListFollowersRequest(user_id=7, page_size=1, page_token=first.next_page_token))
    assert [e.user_id for e in second.followers] == [MAX_ID]
    assert second.next_page_token == ""
    assert await followers_of(stub, MAX_ID, page_size=1) == [1, 7]
    assert await following_of(stub, MAX_ID, page_size=1) == [7]

    async def max_counts() -> tuple[int, int]:
        reply = await stub.GetCounts(pb.GetCountsRequest(user_id=MAX_ID))
        return reply.followers_count, reply.following_count

    await eventually(max_counts, lambda c: c == (2, 1))
    reply = await stub.BatchGetCounts(pb.BatchGetCountsRequest(user_ids=[MAX_ID, 7]))
    assert [(c.user_id, c.followers_count, c.following_count) for c in reply.counts] == [(MAX_ID, 2, 1), (7, 2, 1)]

    await stub.Unfollow(pb.UnfollowRequest(follower_id=MAX_ID, followee_id=7))
    assert not (await stub.IsFollowing(pb.IsFollowingRequest(follower_id=MAX_ID, followee_id=7))).following
    assert await following_of(stub, MAX_ID) == []
    assert await followers_of(stub, 7) == [MAX_ID - 1]


def request_id_of(metadata: Any) -> list[str]:
    return [value for key, value in (metadata or ()) if key == "x-request-id"]


async def test_response_carries_a_request_id(stub: Stub) -> None:
    """Every response carries a non-empty x-request-id trailer, different per call."""
    seen = []
    for _ in range(2):
        call = stub.IsFollowing(pb.IsFollowingRequest(follower_id=1, followee_id=2))
        await call
        ids = request_id_of(await call.trailing_metadata())
        assert len(ids) == 1
        assert ids[0]
        seen.append(ids[0])
    assert seen[0] != seen[1]


async def test_caller_request_id_is_echoed_on_success_and_on_error(stub: Stub) -> None:
    """A caller-provided x-request-id comes back unchanged: in the trailers of a successful call,
    and in both the headers and the trailers of a refused one (next to the status details)."""
    call = stub.GetCounts(pb.GetCountsRequest(user_id=1), metadata=(("x-request-id", "req-abc-123"),))
    await call
    assert request_id_of(await call.trailing_metadata()) == ["req-abc-123"]
    assert request_id_of(await call.initial_metadata()) == []

    failing = stub.Follow(pb.FollowRequest(follower_id=4, followee_id=4), metadata=(("x-request-id", "req-bad-1"),))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await failing
    assert caught.value.code() == INVALID
    assert request_id_of(caught.value.initial_metadata()) == ["req-bad-1"]
    assert request_id_of(caught.value.trailing_metadata()) == ["req-bad-1"]
    assert error_info(caught.value).reason == "SELF_FOLLOW"  # the status details survive beside the ID


async def test_oversized_caller_request_id_is_replaced(stub: Stub) -> None:
    """A caller's x-request-id longer than 128 characters is not echoed; the call gets a fresh ID instead."""
    call = stub.GetCounts(pb.GetCountsRequest(user_id=1), metadata=(("x-request-id", "r" * 200),))
    await call
    ids = request_id_of(await call.trailing_metadata())
    assert len(ids) == 1
    assert ids[0]
    assert ids[0] != "r" * 200


# -- user IDs --------------------------------------------------------------------------------


@on_the_graph
async def test_self_follow_is_invalid_argument(graph: Graph) -> None:
    """Following oneself is INVALID_ARGUMENT with reason SELF_FOLLOW and makes no edge."""
    info = await rejected(graph.stub.Follow(pb.FollowRequest(follower_id=3, followee_id=3)), INVALID, "SELF_FOLLOW")
    assert info.metadata["user_id"] == "3"
    assert not (await graph.stub.IsFollowing(pb.IsFollowingRequest(follower_id=3, followee_id=3))).following


ZERO_ID_CALLS: list[tuple[str, Callable[[Stub], Awaitable[Any]], str]] = [
    ("Follow follower 0", lambda s: s.Follow(pb.FollowRequest(follower_id=0, followee_id=2)), "follower_id"),
    ("Follow followee 0", lambda s: s.Follow(pb.FollowRequest(follower_id=1, followee_id=0)), "followee_id"),
    ("Follow follower missing", lambda s: s.Follow(pb.FollowRequest(followee_id=2)), "follower_id"),
    ("Follow followee missing", lambda s: s.Follow(pb.FollowRequest(follower_id=1)), "followee_id"),
    ("Follow both missing", lambda s: s.Follow(pb.FollowRequest()), "follower_id"),
    ("Unfollow follower 0", lambda s: s.Unfollow(pb.UnfollowRequest(follower_id=0, followee_id=2)), "follower_id"),
    ("Unfollow followee 0", lambda s: s.Unfollow(pb.UnfollowRequest(follower_id=1, followee_id=0)), "followee_id"),
    (
        "IsFollowing follower 0",
        lambda s: s.IsFollowing(pb.IsFollowingRequest(follower_id=0, followee_id=2)),
        "follower_id",
    ),
    (
        "IsFollowing followee 0",
        lambda s: s.IsFollowing(pb.IsFollowingRequest(follower_id=1, followee_id=0)),
        "followee_id",
    ),
    ("ListFollowers 0", lambda s: s.ListFollowers(pb.ListFollowersRequest(user_id=0)), "user_id"),
    ("ListFollowing 0", lambda s: s.ListFollowing(pb.ListFollowingRequest(user_id=0)), "user_id"),
    ("GetCounts 0", lambda s: s.GetCounts(pb.GetCountsRequest(user_id=0)), "user_id"),
    (
        "BatchGetCounts with a 0 inside",
        lambda s: s.BatchGetCounts(pb.BatchGetCountsRequest(user_ids=[1, 2, 0, 3])),
        "user_ids[2]",
    ),
    ("BatchGetCounts [0]", lambda s: s.BatchGetCounts(pb.BatchGetCountsRequest(user_ids=[0])), "user_ids[0]"),
]


@on_the_graph
@pytest.mark.parametrize(("call", "field"), [(c, f) for _, c, f in ZERO_ID_CALLS], ids=[n for n, _, _ in ZERO_ID_CALLS])
async def test_user_id_zero_or_missing_is_invalid_user_id(
    graph: Graph, call: Callable[[Stub], Awaitable[Any]], field: str
) -> None:
    """A user ID of 0 (or an unset one) is INVALID_ARGUMENT / INVALID_USER_ID naming the offending field."""
    info = await rejected(call(graph.stub), INVALID, "INVALID_USER_ID")
    assert info.metadata["field"] == field


# -- page size -------------------------------------------------------------------------------


@on_the_graph
@pytest.mark.parametrize("page_size", [-1, -50, -(2**31)])
async def test_negative_page_size_is_invalid_page_size(graph: Graph, page_size: int) -> None:
    """A negative page_size on either list RPC is INVALID_ARGUMENT / INVALID_PAGE_SIZE."""
    stub = graph.stub
    info = await rejected(
        stub.ListFollowers(pb.ListFollowersRequest(user_id=2, page_size=page_size)), INVALID, "INVALID_PAGE_SIZE"
    )
    assert info.metadata["page_size"] == str(page_size)
    await rejected(
        stub.ListFollowing(pb.ListFollowingRequest(user_id=2, page_size=page_size)), INVALID, "INVALID_PAGE_SIZE"
    )


# -- page tokens -----------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def forged_signature(tokens: Tokens) -> str:
    """A well-formed token for the right query whose signature was made up."""
    payload = json.dumps({"v": 1, "q": "followers:2", "t": 1, "u": 1}, separators=(",", ":")).encode()
    return f"{_b64(payload)}.{_b64(bytes(16))}"


def forged_payload(tokens: Tokens) -> str:
    """A real token's signature on a payload edited to point elsewhere."""
    body, mac = tokens.followers_of_2.split(".")
    data = json.loads(_unb64(body))
    data["u"] = 1 if data["u"] != 1 else 2
    return f"{_b64(json.dumps(data, separators=(',', ':')).encode())}.{mac}"


def forged_scope(tokens: Tokens) -> str:
    """A real token of user 5's followers with the payload re-scoped to user 2 (signature kept)."""
    body, mac = tokens.followers_of_5.split(".")
    data = json.loads(_unb64(body))
    data["q"] = "followers:2"
    return f"{_b64(json.dumps(data, separators=(',', ':')).encode())}.{mac}"


def corrupted_middle(tokens: Tokens) -> str:
    token = tokens.followers_of_2
    i = len(token) // 3
    return token[:i] + ("A" if token[i] != "A" else "B") + token[i + 1 :]


def truncated_half(tokens: Tokens) -> str:
    return tokens.followers_of_2[: len(tokens.followers_of_2) // 2]


def truncated_by_one(tokens: Tokens) -> str:
    return tokens.followers_of_2[:-1]


def truncated_signature(tokens: Tokens) -> str:
    return tokens.followers_of_2.split(".")[0] + "."


def signature_only(tokens: Tokens) -> str:
    return "." + tokens.followers_of_2.split(".")[1]


def another_users_token(tokens: Tokens) -> str:
    return tokens.followers_of_5


def other_rpcs_token(tokens: Tokens) -> str:
    return tokens.following_of_2


def random_garbage(tokens: Tokens) -> str:
    return _b64(random.Random(7).randbytes(60))


def random_garbage_with_dot(tokens: Tokens) -> str:
    rng = random.Random(8)
    return f"{_b64(rng.randbytes(40))}.{_b64(rng.randbytes(16))}"


def not_base64(tokens: Tokens) -> str:
    return "this is not a page token!"


def non_ascii(tokens: Tokens) -> str:
    return "é" * 10 + "." + "ü" * 10


def very_long(tokens: Tokens) -> str:
    return tokens.followers_of_2 * 1000


def very_long_garbage(tokens: Tokens) -> str:
    return "A" * 100_000 + "." + "B" * 22


def two_tokens_joined(tokens: Tokens) -> str:
    return tokens.followers_of_2 + "." + tokens.followers_of_2


BAD_TOKENS = [
    forged_signature,
    forged_payload,
    forged_scope,
    corrupted_middle,
    truncated_half,
    truncated_by_one,
    truncated_signature,
    signature_only,
    another_users_token,
    other_rpcs_token,
    random_garbage,
    random_garbage_with_dot,
    not_base64,
    non_ascii,
    very_long,
    very_long_garbage,
    two_tokens_joined,
]


@on_the_graph
@pytest.mark.parametrize("make", BAD_TOKENS, ids=[f.__name__ for f in BAD_TOKENS])
async def test_bad_page_token_on_list_followers_is_invalid_page_token(
    graph: Graph, make: Callable[[Tokens], str]
) -> None:
    """A forged, corrupted, truncated, foreign, garbage or oversized token on ListFollowers is INVALID_PAGE_TOKEN."""
    token = make(graph.tokens)
    assert token != graph.tokens.followers_of_2
    await rejected(
        graph.stub.ListFollowers(pb.ListFollowersRequest(user_id=2, page_size=1, page_token=token)),
        INVALID,
        "INVALID_PAGE_TOKEN",
    )


@on_the_graph
async def test_list_followers_token_is_refused_by_list_following(graph: Graph) -> None:
    """A ListFollowers token used on ListFollowing of the same user is INVALID_PAGE_TOKEN."""
    await rejected(
        graph.stub.ListFollowing(pb.ListFollowingRequest(user_id=2, page_token=graph.tokens.followers_of_2)),
        INVALID,
        "INVALID_PAGE_TOKEN",
    )


@on_the_graph
async def test_every_single_character_change_of_a_real_token_is_refused(graph: Graph) -> None:
    """Changing any one character of a real token, to any other token character, makes it INVALID_PAGE_TOKEN."""
    token = graph.tokens.followers_of_2
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_."
    rng = random.Random(11)
    corrupted = set()
    for i, char in enumerate(token):
        # Two replacements per position: the neighbour in the alphabet (often differs only in
        # low bits) and a random other character.
        neighbour = alphabet[(alphabet.index(char) + 1) % len(alphabet)] if char in alphabet else "A"
        corrupted.add(token[:i] + neighbour + token[i + 1 :])
        corrupted.add(token[:i] + rng.choice([c for c in alphabet if c != char]) + token[i + 1 :])
    corrupted.discard(token)
    for bad in sorted(corrupted):
        await rejected(
            graph.stub.ListFollowers(pb.ListFollowersRequest(user_id=2, page_size=1, page_token=bad)),
            INVALID,
            "INVALID_PAGE_TOKEN",
        )


@on_the_graph
async def test_real_token_still_works_after_refusals(graph: Graph) -> None:
    """After bad tokens were refused, the real token still continues its list where the first page ended."""
    stub = graph.stub
    await rejected(
        stub.ListFollowers(pb.ListFollowersRequest(user_id=2, page_token=corrupted_middle(graph.tokens))),
        INVALID,
        "INVALID_PAGE_TOKEN",
    )
    rest = await stub.ListFollowers(pb.ListFollowersRequest(user_id=2, page_token=graph.tokens.followers_of_2))
    assert [e.user_id for e in rest.followers] == [3, 1]
    assert rest.next_page_token == ""


# -- batches ----------------------------------------------------------------------------------


@on_the_graph
async def test_batch_get_counts_with_101_ids_is_too_many_ids(graph: Graph) -> None:
    """BatchGetCounts with 101 IDs is INVALID_ARGUMENT / TOO_MANY_IDS; exactly 100 is accepted."""
    info = await rejected(
        graph.stub.BatchGetCounts(pb.BatchGetCountsRequest(user_ids=list(range(1, 102)))), INVALID, "TOO_MANY_IDS"
    )
    assert info.metadata["size"] == "101"
    assert info.metadata["limit"] == "100"
    reply = await graph.stub.BatchGetCounts(pb.BatchGetCountsRequest(user_ids=list(range(1, 101))))
    assert [c.user_id for c in reply.counts] == list(range(1, 101))


@on_the_graph
async def test_empty_batch_get_counts_returns_no_rows(graph: Graph) -> None:
    """BatchGetCounts with no IDs succeeds with no rows."""
    reply = await graph.stub.BatchGetCounts(pb.BatchGetCountsRequest())
    assert list(reply.counts) == []
