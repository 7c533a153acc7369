"""Bad input to the relationship RPCs is refused with the right status and ``google.rpc.ErrorInfo``,
and never changes the graph: no edge, no request, no block, no mute, no privacy change.

One small graph is built once for the module (the refused calls must leave it exactly as it was);
when the module ends, every item of its tables is compared with those stored when it was built
(``tests/support/table_items.py``: a difference names the item, and so the call that wrote it), and
what callers read, through the cache and straight from DynamoDB, with the snapshot taken then.
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
import pytest_asyncio
import redis
from google.protobuf import duration_pb2
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph_devstack.processes import ManagedProcess

from graph_service.domain.models import Direction, Edge
from graph_service.rules.page_tokens import PageTokenCodec
from graph_service.settings import Settings
from tests.support.graph_calls import Flags, Model, Stub, ids, rejected, relationships, requests_of, truth_stub
from tests.support.runtimes import make_settings, running_server, stub_for
from tests.support.table_items import Items, differences, stored_items
from tests.support.tables import create_tables

pytestmark = pytest.mark.asyncio(loop_scope="module")

INVALID = grpc.StatusCode.INVALID_ARGUMENT
MAX_ID = 2**64 - 1
USERS = list(range(1, 11))
PROBE = 500  # an account outside the graph, used to observe privacy
# 1 follows 3 and 4, 6 follows 3 and 5; 3, 4 and 5 follow 2; 2 follows 3 and 4; 3 <-> 6 follow each other.
EDGES = {(1, 3), (1, 4), (6, 3), (6, 5), (3, 2), (4, 2), (5, 2), (2, 3), (2, 4), (3, 6)}
PRIVATE = {7, 8}
REQUESTS = {(1, 7), (2, 7), (3, 8), (4, 8)}
BLOCKS = {(9, 10), (10, 1), (8, 5)}  # 8 is private: a follow by 5 would be a request
MUTES = {(1, 3): True, (1, 4): False, (9, 2): False, (9, 3): True}  # (muter, muted) -> notifications too
MODEL = Model(edges=EDGES, requests=REQUESTS, blocks=BLOCKS, mutes=MUTES)


# -- the graph ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tokens:
    """Real page tokens, each from a list longer than its page."""

    followers_2: str  # ListFollowers(2)
    following_1: str  # ListFollowing(1)
    known_1_2: str  # ListKnownFollowers(viewer 1, user 2)
    known_6_2: str  # ListKnownFollowers(viewer 6, user 2)
    mutual_2: str  # ListMutualFollows(2)
    mutual_3: str  # ListMutualFollows(3)
    requests_7: str  # ListFollowRequests(7)
    requests_8: str  # ListFollowRequests(8)
    mutes_1: str  # ListMutes(1)
    mutes_9: str  # ListMutes(9)


@dataclass(frozen=True)
class Snapshot:
    followers: dict[int, list[int]]
    following: dict[int, list[int]]
    requests: dict[int, list[int]]
    relationships: dict[int, list[tuple[int, Flags]]]


@dataclass(frozen=True)
class World:
    stub: Stub  # through the cache
    truth: Stub  # straight from DynamoDB
    tokens: Tokens
    before: Snapshot
    settings: Settings
    items: Items  # every item of its tables, as the build left them


async def snapshot(stub: Stub) -> Snapshot:
    """Everything a caller can read about the graph's users: lists, requests, all six flags of every pair."""

    async def of(user: int) -> tuple[list[int], list[int], list[int], list[tuple[int, Flags]]]:
        return (
            await ids(stub, Direction.FOLLOWERS, user),
            await ids(stub, Direction.FOLLOWING, user),
            await requests_of(stub, user),
            await relationships(stub, user, USERS),
        )

    rows = dict(zip(USERS, await asyncio.gather(*(of(u) for u in USERS)), strict=True))
    return Snapshot(
        followers={u: r[0] for u, r in rows.items()},
        following={u: r[1] for u, r in rows.items()},
        requests={u: r[2] for u, r in rows.items()},
        relationships={u: r[3] for u, r in rows.items()},
    )


async def assert_privacy_unchanged(stub: Stub) -> None:
    """A follow by an outsider is a request exactly to the private accounts; it is withdrawn again after."""

    async def probe(user: int) -> int:
        state = (await stub.Follow(pb.FollowRequest(follower_id=PROBE, followee_id=user))).state
        await stub.Unfollow(pb.UnfollowRequest(follower_id=PROBE, followee_id=user))
        return int(state)

    states = dict(zip(USERS, await asyncio.gather(*(probe(u) for u in USERS)), strict=True))
    expected = {u: pb.FOLLOW_STATE_REQUESTED if u in PRIVATE else pb.FOLLOW_STATE_FOLLOWING for u in USERS}
    assert states == expected


async def first_token(call: Awaitable[Any]) -> str:
    token: str = (await call).next_page_token
    assert token
    return token


async def build(stub: Stub) -> Tokens:
    for follower, followee in sorted(EDGES):
        assert (
            await stub.Follow(pb.FollowRequest(follower_id=follower, followee_id=followee))
        ).state == pb.FOLLOW_STATE_FOLLOWING
    for user in PRIVATE:
        await stub.SetPrivacy(pb.SetPrivacyRequest(user_id=user, private=True))
    for follower, followee in sorted(REQUESTS):
        assert (
            await stub.Follow(pb.FollowRequest(follower_id=follower, followee_id=followee))
        ).state == pb.FOLLOW_STATE_REQUESTED
    for blocker, blocked in sorted(BLOCKS):
        await stub.Block(pb.BlockRequest(blocker_id=blocker, blocked_id=blocked))
    for (muter, muted), notifications in sorted(MUTES.items()):
        await stub.Mute(pb.MuteRequest(muter_id=muter, muted_id=muted, notifications=notifications))
    return Tokens(
        followers_2=await first_token(stub.ListFollowers(pb.ListFollowersRequest(user_id=2, page_size=1))),
        following_1=await first_token(stub.ListFollowing(pb.ListFollowingRequest(user_id=1, page_size=1))),
        known_1_2=await first_token(
            stub.ListKnownFollowers(pb.ListKnownFollowersRequest(viewer_id=1, user_id=2, page_size=1))
        ),
        known_6_2=await first_token(
            stub.ListKnownFollowers(pb.ListKnownFollowersRequest(viewer_id=6, user_id=2, page_size=1))
        ),
        mutual_2=await first_token(stub.ListMutualFollows(pb.ListMutualFollowsRequest(user_id=2, page_size=1))),
        mutual_3=await first_token(stub.ListMutualFollows(pb.ListMutualFollowsRequest(user_id=3, page_size=1))),
        requests_7=await first_token(stub.ListFollowRequests(pb.ListFollowRequestsRequest(user_id=7, page_size=1))),
        requests_8=await first_token(stub.ListFollowRequests(pb.ListFollowRequestsRequest(user_id=8, page_size=1))),
        mutes_1=await first_token(stub.ListMutes(pb.ListMutesRequest(user_id=1, page_size=1))),
        mutes_9=await first_token(stub.ListMutes(pb.ListMutesRequest(user_id=9, page_size=1))),
    )


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(dynamodb_local: str, redis_node: ManagedProcess) -> AsyncIterator[World]:
    """The graph, built once: a server with a cache, a cache-less server on the same tables, real tokens."""
    client = redis.Redis(port=redis_node.port)
    client.flushall()
    client.close()
    settings = make_settings(dynamodb_local, f"redis://127.0.0.1:{redis_node.port}/0")
    await create_tables(settings, streams=False)
    async with running_server(settings) as server, stub_for(server.port) as stub, truth_stub(settings) as truth:
        tokens = await build(stub)
        before = await snapshot(truth)
        assert before == await snapshot(stub)
        for user in USERS:  # the graph is the model
            assert before.relationships[user] == [(t, MODEL.relationship(user, t)) for t in USERS]
        world = World(stub, truth, tokens, before, settings, await stored_items(settings))
        yield world
        # Once for the module, not after each of its 200 tests (a fifth of its CPU): the message
        # lists every item a refused call wrote, which names the call.
        changed = differences(world.items, await stored_items(settings))
        assert not changed, f"a refused call changed the graph: {changed}"
        await assert_privacy_unchanged(stub)
        assert await snapshot(stub) == before
        assert await snapshot(truth) == before


@pytest_asyncio.fixture(loop_scope="module")
async def graph(world: World) -> AsyncIterator[World]:
    """The module's graph; every item of its tables must be as the build left it when the module ends
    (``world``), and what callers read, through the cache and straight from DynamoDB, too."""
    yield world


Call = Callable[[Stub], Awaitable[Any]]


# -- user IDs -----------------------------------------------------------------------------------------


def _rel(actor: int, targets: list[int]) -> Call:
    return lambda s: s.GetRelationships(pb.GetRelationshipsRequest(actor_id=actor, target_ids=targets))


ZERO_ID_CALLS: list[tuple[str, Call, str]] = [
    ("GetRelationships actor 0", _rel(0, [2, 3]), "actor_id"),
    ("GetRelationships actor 0 no targets", _rel(0, []), "actor_id"),
    ("GetRelationships actor 0 target 0", _rel(0, [0]), "actor_id"),
    ("GetRelationships target 0 at 3", _rel(1, [2, 3, 4, 0, 5]), "target_ids[3]"),
    ("GetRelationships target [0]", _rel(1, [0]), "target_ids[0]"),
    ("GetRelationships two zeros", _rel(1, [2, 0, 0]), "target_ids[1]"),
    ("GetRelationships 100 targets last 0", _rel(1, [*range(1, 100), 0]), "target_ids[99]"),
    (
        "ListKnownFollowers viewer 0",
        lambda s: s.ListKnownFollowers(pb.ListKnownFollowersRequest(viewer_id=0, user_id=2)),
        "viewer_id",
    ),
    (
        "ListKnownFollowers user 0",
        lambda s: s.ListKnownFollowers(pb.ListKnownFollowersRequest(viewer_id=1, user_id=0)),
        "user_id",
    ),
    ("ListKnownFollowers both 0", lambda s: s.ListKnownFollowers(pb.ListKnownFollowersRequest()), "viewer_id"),
    ("ListMutualFollows 0", lambda s: s.ListMutualFollows(pb.ListMutualFollowsRequest(user_id=0)), "user_id"),
    ("SuggestFollows 0", lambda s: s.SuggestFollows(pb.SuggestFollowsRequest(user_id=0, limit=5)), "user_id"),
    ("SuggestFollows 0 default limit", lambda s: s.SuggestFollows(pb.SuggestFollowsRequest()), "user_id"),
    ("ListFollowRequests 0", lambda s: s.ListFollowRequests(pb.ListFollowRequestsRequest(user_id=0)), "user_id"),
    (
        "Accept user 0",
        lambda s: s.AcceptFollowRequest(pb.AcceptFollowRequestRequest(user_id=0, requester_id=1)),
        "user_id",
    ),
    (
        "Accept requester 0",
        lambda s: s.AcceptFollowRequest(pb.AcceptFollowRequestRequest(user_id=7, requester_id=0)),
        "requester_id",
    ),
    ("Accept both 0", lambda s: s.AcceptFollowRequest(pb.AcceptFollowRequestRequest()), "user_id"),
    (
        "Reject user 0",
        lambda s: s.RejectFollowRequest(pb.RejectFollowRequestRequest(user_id=0, requester_id=1)),
        "user_id",
    ),
    (
        "Reject requester 0",
        lambda s: s.RejectFollowRequest(pb.RejectFollowRequestRequest(user_id=7, requester_id=0)),
        "requester_id",
    ),
    ("Reject both 0", lambda s: s.RejectFollowRequest(pb.RejectFollowRequestRequest()), "user_id"),
    ("Block blocker 0", lambda s: s.Block(pb.BlockRequest(blocker_id=0, blocked_id=3)), "blocker_id"),
    ("Block blocked 0", lambda s: s.Block(pb.BlockRequest(blocker_id=3, blocked_id=0)), "blocked_id"),
    ("Block both 0", lambda s: s.Block(pb.BlockRequest()), "blocker_id"),
    ("Unblock blocker 0", lambda s: s.Unblock(pb.UnblockRequest(blocker_id=0, blocked_id=10)), "blocker_id"),
    ("Unblock blocked 0", lambda s: s.Unblock(pb.UnblockRequest(blocker_id=9, blocked_id=0)), "blocked_id"),
    ("Unblock both 0", lambda s: s.Unblock(pb.UnblockRequest()), "blocker_id"),
    (
        "RemoveFollower user 0",
        lambda s: s.RemoveFollower(pb.RemoveFollowerRequest(user_id=0, follower_id=3)),
        "user_id",
    ),
    (
        "RemoveFollower follower 0",
        lambda s: s.RemoveFollower(pb.RemoveFollowerRequest(user_id=2, follower_id=0)),
        "follower_id",
    ),
    ("RemoveFollower both 0", lambda s: s.RemoveFollower(pb.RemoveFollowerRequest()), "user_id"),
    ("Mute muter 0", lambda s: s.Mute(pb.MuteRequest(muter_id=0, muted_id=3)), "muter_id"),
    ("Mute muted 0", lambda s: s.Mute(pb.MuteRequest(muter_id=1, muted_id=0)), "muted_id"),
    ("Mute both 0", lambda s: s.Mute(pb.MuteRequest()), "muter_id"),
    ("Unmute muter 0", lambda s: s.Unmute(pb.UnmuteRequest(muter_id=0, muted_id=3)), "muter_id"),
    ("Unmute muted 0", lambda s: s.Unmute(pb.UnmuteRequest(muter_id=1, muted_id=0)), "muted_id"),
    ("Unmute both 0", lambda s: s.Unmute(pb.UnmuteRequest()), "muter_id"),
    ("ListMutes 0", lambda s: s.ListMutes(pb.ListMutesRequest(user_id=0)), "user_id"),
]


@pytest.mark.parametrize(("call", "field"), [(c, f) for _, c, f in ZERO_ID_CALLS], ids=[n for n, _, _ in ZERO_ID_CALLS])
async def test_user_id_zero_is_invalid_user_id(graph: World, call: Call, field: str) -> None:
    """A user ID of 0 (or unset) in any ID field is INVALID_ARGUMENT / INVALID_USER_ID naming the field."""
    info = await rejected(call(graph.stub), INVALID, "INVALID_USER_ID")
    assert info.metadata["field"] == field


@pytest.mark.parametrize("private", [True, False])
async def test_set_privacy_of_user_zero_is_invalid_user_id(graph: World, private: bool) -> None:
    """SetPrivacy of user 0 is INVALID_USER_ID and changes nobody's privacy."""
    info = await rejected(graph.stub.SetPrivacy(pb.SetPrivacyRequest(private=private)), INVALID, "INVALID_USER_ID")
    assert info.metadata["field"] == "user_id"
    await assert_privacy_unchanged(graph.stub)


# -- self pairs ---------------------------------------------------------------------------------------

SELF_CALLS: list[tuple[str, Callable[[Stub, int], Awaitable[Any]]]] = [
    ("Accept", lambda s, u: s.AcceptFollowRequest(pb.AcceptFollowRequestRequest(user_id=u, requester_id=u))),
    ("Reject", lambda s, u: s.RejectFollowRequest(pb.RejectFollowRequestRequest(user_id=u, requester_id=u))),
    ("Block", lambda s, u: s.Block(pb.BlockRequest(blocker_id=u, blocked_id=u))),
    ("Unblock", lambda s, u: s.Unblock(pb.UnblockRequest(blocker_id=u, blocked_id=u))),
    ("RemoveFollower", lambda s, u: s.RemoveFollower(pb.RemoveFollowerRequest(user_id=u, follower_id=u))),
    ("Mute", lambda s, u: s.Mute(pb.MuteRequest(muter_id=u, muted_id=u, notifications=True))),
    ("Unmute", lambda s, u: s.Unmute(pb.UnmuteRequest(muter_id=u, muted_id=u))),
]


@pytest.mark.parametrize("user", [1, 7, 9, MAX_ID], ids=["public", "private", "blocker", "max-id"])
@pytest.mark.parametrize("call", [c for _, c in SELF_CALLS], ids=[n for n, _ in SELF_CALLS])
async def test_self_pair_is_self_relation(graph: World, call: Callable[[Stub, int], Awaitable[Any]], user: int) -> None:
    """Accept, Reject, Block, Unblock, RemoveFollower, Mute and Unmute of an account with itself are SELF_RELATION."""
    info = await rejected(call(graph.stub, user), INVALID, "SELF_RELATION")
    assert info.metadata["user_id"] == str(user)
    assert await relationships(graph.stub, user, [user]) == [(user, frozenset())]


@pytest.mark.parametrize("user", [1, 7], ids=["public", "private"])
async def test_follow_self_stays_self_follow(graph: World, user: int) -> None:
    """Following oneself is SELF_FOLLOW, also for a private account (no request to oneself is made)."""
    info = await rejected(
        graph.stub.Follow(pb.FollowRequest(follower_id=user, followee_id=user)), INVALID, "SELF_FOLLOW"
    )
    assert info.metadata["user_id"] == str(user)
    assert user not in await requests_of(graph.truth, user)


# -- batches ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "targets", [list(range(1, 102)), list(range(1, 1001)), [2] * 101], ids=["101", "1000", "101-duplicates"]
)
async def test_too_many_targets_is_too_many_ids(graph: World, targets: list[int]) -> None:
    """GetRelationships with more than 100 targets is INVALID_ARGUMENT / TOO_MANY_IDS."""
    info = await rejected(_rel(1, targets)(graph.stub), INVALID, "TOO_MANY_IDS")
    assert info.metadata["size"] == str(len(targets))
    assert info.metadata["limit"] == "100"


@pytest.mark.parametrize(
    "targets",
    [list(range(1, 101)), [7] * 100, [*range(MAX_ID - 99, MAX_ID + 1)], [3, 1, 3, 10, 1]],
    ids=["1-to-100", "100-duplicates", "largest-ids", "with-actor-and-duplicates"],
)
async def test_up_to_100_targets_are_answered_in_request_order(graph: World, targets: list[int]) -> None:
    """Exactly 100 targets (and any duplicates) are answered, one row each, in request order, correctly."""
    for stub in (graph.stub, graph.truth):
        got = await relationships(stub, 1, targets)
        assert got == [(t, MODEL.relationship(1, t)) for t in targets]


# -- page sizes and limits ----------------------------------------------------------------------------

LIST_CALLS: list[tuple[str, Callable[[Stub, int, str], Awaitable[Any]]]] = [
    (
        "ListKnownFollowers",
        lambda s, n, t: s.ListKnownFollowers(
            pb.ListKnownFollowersRequest(viewer_id=1, user_id=2, page_size=n, page_token=t)
        ),
    ),
    (
        "ListMutualFollows",
        lambda s, n, t: s.ListMutualFollows(pb.ListMutualFollowsRequest(user_id=2, page_size=n, page_token=t)),
    ),
    (
        "ListFollowRequests",
        lambda s, n, t: s.ListFollowRequests(pb.ListFollowRequestsRequest(user_id=7, page_size=n, page_token=t)),
    ),
    ("ListMutes", lambda s, n, t: s.ListMutes(pb.ListMutesRequest(user_id=1, page_size=n, page_token=t))),
]


@pytest.mark.parametrize("page_size", [-1, -(2**31)])
@pytest.mark.parametrize("call", [c for _, c in LIST_CALLS], ids=[n for n, _ in LIST_CALLS])
async def test_negative_page_size_is_invalid_page_size(
    graph: World, call: Callable[[Stub, int, str], Awaitable[Any]], page_size: int
) -> None:
    """A negative page_size on the new list RPCs is INVALID_ARGUMENT / INVALID_PAGE_SIZE."""
    info = await rejected(call(graph.stub, page_size, ""), INVALID, "INVALID_PAGE_SIZE")
    assert info.metadata["page_size"] == str(page_size)


def suggested(reply: pb.SuggestFollowsResponse) -> list[tuple[int, int]]:
    return [(s.user_id, s.mutual_count) for s in reply.suggestions]


@pytest.mark.parametrize("limit", [-1, -(2**31), 101, 2**31 - 1])
async def test_bad_suggest_limit_is_invalid_limit(graph: World, limit: int) -> None:
    """SuggestFollows with a limit below 0 or above 100 is INVALID_ARGUMENT / INVALID_LIMIT."""
    info = await rejected(
        graph.stub.SuggestFollows(pb.SuggestFollowsRequest(user_id=1, limit=limit)), INVALID, "INVALID_LIMIT"
    )
    assert info.metadata["limit"] == str(limit)
    assert info.metadata["maximum"] == "100"


@pytest.mark.parametrize(("limit", "expected"), [(0, [(2, 2), (6, 1)]), (1, [(2, 2)]), (100, [(2, 2), (6, 1)])])
async def test_suggest_limit_0_to_100_is_accepted(graph: World, limit: int, expected: list[tuple[int, int]]) -> None:
    """Limits 0 (the default), 1 and 100 are accepted; the answer skips followed, requested and blocked accounts."""
    reply = await graph.stub.SuggestFollows(pb.SuggestFollowsRequest(user_id=1, limit=limit))
    assert suggested(reply) == expected


# -- page tokens --------------------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _payload(token: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(_unb64(token.split(".")[0]))
    return data


def _with_payload(token: str, data: dict[str, Any]) -> str:
    return f"{_b64(json.dumps(data, separators=(',', ':')).encode())}.{token.split('.')[1]}"


@dataclass(frozen=True)
class ListRpc:
    """A paged RPC of one query: its call, its real token, and a real token of the same RPC for another query."""

    call: Callable[[Stub, str], Awaitable[Any]]
    own: Callable[[Tokens], str]
    other: Callable[[Tokens], str]


LIST_RPCS = {
    "ListKnownFollowers": ListRpc(
        lambda s, t: s.ListKnownFollowers(
            pb.ListKnownFollowersRequest(viewer_id=1, user_id=2, page_size=1, page_token=t)
        ),
        lambda k: k.known_1_2,
        lambda k: k.known_6_2,
    ),
    "ListMutualFollows": ListRpc(
        lambda s, t: s.ListMutualFollows(pb.ListMutualFollowsRequest(user_id=2, page_size=1, page_token=t)),
        lambda k: k.mutual_2,
        lambda k: k.mutual_3,
    ),
    "ListFollowRequests": ListRpc(
        lambda s, t: s.ListFollowRequests(pb.ListFollowRequestsRequest(user_id=7, page_size=1, page_token=t)),
        lambda k: k.requests_7,
        lambda k: k.requests_8,
    ),
    "ListMutes": ListRpc(
        lambda s, t: s.ListMutes(pb.ListMutesRequest(user_id=1, page_size=1, page_token=t)),
        lambda k: k.mutes_1,
        lambda k: k.mutes_9,
    ),
}


def forged_signature(rpc: ListRpc, tokens: Tokens) -> str:
    """The right query in a well-formed payload, with a made-up signature."""
    data = _payload(rpc.own(tokens))
    return f"{_b64(json.dumps(data, separators=(',', ':')).encode())}.{_b64(bytes(16))}"


def forged_cursor(rpc: ListRpc, tokens: Tokens) -> str:
    """A real token's signature on a payload whose cursor was moved."""
    data = _payload(rpc.own(tokens))
    data["u"] = data["u"] + 1
    return _with_payload(rpc.own(tokens), data)


def rescoped(rpc: ListRpc, tokens: Tokens) -> str:
    """A real token of another query of this RPC, its payload re-scoped to this query, signature kept."""
    data = _payload(rpc.other(tokens))
    data["q"] = _payload(rpc.own(tokens))["q"]
    return _with_payload(rpc.other(tokens), data)


def another_secret(rpc: ListRpc, tokens: Tokens) -> str:
    """A token for exactly this query, signed by a deployment with another secret."""
    data = _payload(rpc.own(tokens))
    return PageTokenCodec("another-secret").encode(data["q"], Edge(data["u"], data["t"]))


def corrupted_middle(rpc: ListRpc, tokens: Tokens) -> str:
    token = rpc.own(tokens)
    i = len(token) // 3
    return token[:i] + ("A" if token[i] != "A" else "B") + token[i + 1 :]


def truncated_by_one(rpc: ListRpc, tokens: Tokens) -> str:
    return rpc.own(tokens)[:-1]


def truncated_signature(rpc: ListRpc, tokens: Tokens) -> str:
    return rpc.own(tokens).split(".")[0] + "."


def signature_only(rpc: ListRpc, tokens: Tokens) -> str:
    return "." + rpc.own(tokens).split(".")[1]


def random_garbage(rpc: ListRpc, tokens: Tokens) -> str:
    rng = random.Random(5)
    return f"{_b64(rng.randbytes(40))}.{_b64(rng.randbytes(16))}"


def not_base64(rpc: ListRpc, tokens: Tokens) -> str:
    return "not a token at all!"


def very_long(rpc: ListRpc, tokens: Tokens) -> str:
    return rpc.own(tokens) * 200


def two_tokens_joined(rpc: ListRpc, tokens: Tokens) -> str:
    return rpc.own(tokens) + "." + rpc.own(tokens)


BAD_TOKENS = [
    forged_signature,
    forged_cursor,
    rescoped,
    another_secret,
    corrupted_middle,
    truncated_by_one,
    truncated_signature,
    signature_only,
    random_garbage,
    not_base64,
    very_long,
    two_tokens_joined,
]


@pytest.mark.parametrize("make", BAD_TOKENS, ids=[f.__name__ for f in BAD_TOKENS])
@pytest.mark.parametrize("rpc", list(LIST_RPCS.values()), ids=list(LIST_RPCS))
async def test_bad_page_token_is_invalid_page_token(
    graph: World, rpc: ListRpc, make: Callable[[ListRpc, Tokens], str]
) -> None:
    """A forged, re-scoped, foreign-secret, corrupted, truncated or garbage token is INVALID_PAGE_TOKEN."""
    token = make(rpc, graph.tokens)
    assert token != rpc.own(graph.tokens)
    await rejected(rpc.call(graph.stub, token), INVALID, "INVALID_PAGE_TOKEN")


def _known(viewer: int, user: int) -> Callable[[Stub, str], Awaitable[Any]]:
    return lambda s, t: s.ListKnownFollowers(pb.ListKnownFollowersRequest(viewer_id=viewer, user_id=user, page_token=t))


def _mutual(user: int) -> Callable[[Stub, str], Awaitable[Any]]:
    return lambda s, t: s.ListMutualFollows(pb.ListMutualFollowsRequest(user_id=user, page_token=t))


def _requests(user: int) -> Callable[[Stub, str], Awaitable[Any]]:
    return lambda s, t: s.ListFollowRequests(pb.ListFollowRequestsRequest(user_id=user, page_token=t))


def _mutes(user: int) -> Callable[[Stub, str], Awaitable[Any]]:
    return lambda s, t: s.ListMutes(pb.ListMutesRequest(user_id=user, page_token=t))


def _followers(user: int) -> Callable[[Stub, str], Awaitable[Any]]:
    return lambda s, t: s.ListFollowers(pb.ListFollowersRequest(user_id=user, page_token=t))


def _following(user: int) -> Callable[[Stub, str], Awaitable[Any]]:
    return lambda s, t: s.ListFollowing(pb.ListFollowingRequest(user_id=user, page_token=t))


# (name, the call it is used on, the real token of another query)
FOREIGN_TOKENS: list[tuple[str, Callable[[Stub, str], Awaitable[Any]], Callable[[Tokens], str]]] = [
    ("ListFollowers token on ListKnownFollowers", _known(1, 2), lambda k: k.followers_2),
    ("ListFollowing token on ListKnownFollowers", _known(1, 2), lambda k: k.following_1),
    ("mutual token on ListKnownFollowers", _known(1, 2), lambda k: k.mutual_2),
    ("mutual token on ListKnownFollowers viewer=user", _known(2, 2), lambda k: k.mutual_2),
    ("requests token on ListKnownFollowers", _known(1, 2), lambda k: k.requests_7),
    ("known token of another viewer", _known(1, 2), lambda k: k.known_6_2),
    ("known token used by another viewer", _known(6, 2), lambda k: k.known_1_2),
    ("known token with viewer and user swapped", _known(2, 1), lambda k: k.known_1_2),
    ("known token of another user", _known(1, 5), lambda k: k.known_1_2),
    ("ListFollowers token on ListMutualFollows", _mutual(2), lambda k: k.followers_2),
    ("ListFollowing token on ListMutualFollows", _mutual(2), lambda k: k.following_1),
    ("known token on ListMutualFollows", _mutual(2), lambda k: k.known_1_2),
    ("requests token on ListMutualFollows", _mutual(2), lambda k: k.requests_7),
    ("mutual token of another user", _mutual(2), lambda k: k.mutual_3),
    ("mutual token used for another user", _mutual(4), lambda k: k.mutual_2),
    ("ListFollowers token on ListFollowRequests", _requests(7), lambda k: k.followers_2),
    ("ListFollowing token on ListFollowRequests", _requests(7), lambda k: k.following_1),
    ("known token on ListFollowRequests", _requests(7), lambda k: k.known_1_2),
    ("mutual token on ListFollowRequests", _requests(7), lambda k: k.mutual_2),
    ("requests token of another user", _requests(7), lambda k: k.requests_8),
    ("requests token used for another user", _requests(8), lambda k: k.requests_7),
    ("known token on ListFollowers", _followers(2), lambda k: k.known_1_2),
    ("mutual token on ListFollowers", _followers(2), lambda k: k.mutual_2),
    ("requests token on ListFollowers", _followers(7), lambda k: k.requests_7),
    ("known token on ListFollowing", _following(1), lambda k: k.known_1_2),
    ("mutual token on ListFollowing", _following(2), lambda k: k.mutual_2),
    ("requests token on ListFollowing", _following(8), lambda k: k.requests_8),
    ("ListFollowers token on ListMutes", _mutes(2), lambda k: k.followers_2),
    ("ListFollowing token on ListMutes", _mutes(1), lambda k: k.following_1),
    ("requests token on ListMutes", _mutes(7), lambda k: k.requests_7),
    ("mutes token of another user", _mutes(1), lambda k: k.mutes_9),
    ("mutes token used for another user", _mutes(9), lambda k: k.mutes_1),
    ("mutes token on ListFollowers", _followers(1), lambda k: k.mutes_1),
    ("mutes token on ListFollowRequests", _requests(9), lambda k: k.mutes_9),
]


@pytest.mark.parametrize(
    ("call", "token"), [(c, t) for _, c, t in FOREIGN_TOKENS], ids=[n for n, _, _ in FOREIGN_TOKENS]
)
async def test_foreign_page_token_is_invalid_page_token(
    graph: World, call: Callable[[Stub, str], Awaitable[Any]], token: Callable[[Tokens], str]
) -> None:
    """A real token of another RPC, user or viewer is INVALID_PAGE_TOKEN: tokens are bound to their query."""
    await rejected(call(graph.stub, token(graph.tokens)), INVALID, "INVALID_PAGE_TOKEN")


async def test_real_tokens_continue_their_own_lists(graph: World) -> None:
    """Positive control: each real token is accepted by its own query and continues where page one ended."""
    stub, tokens = graph.stub, graph.tokens
    known = await _known(1, 2)(stub, tokens.known_1_2)
    assert [e.user_id for e in known.followers] == [3]
    assert known.next_page_token == ""
    known = await _known(6, 2)(stub, tokens.known_6_2)
    assert [e.user_id for e in known.followers] == [3]
    mutual = await _mutual(2)(stub, tokens.mutual_2)
    assert [u.user_id for u in mutual.users] == [3]
    mutual = await _mutual(3)(stub, tokens.mutual_3)
    assert [u.user_id for u in mutual.users] == [2]
    requests = await _requests(7)(stub, tokens.requests_7)
    assert [r.user_id for r in requests.requests] == [1]
    requests = await _requests(8)(stub, tokens.requests_8)
    assert [r.user_id for r in requests.requests] == [3]
    clamped = await stub.ListFollowRequests(pb.ListFollowRequestsRequest(user_id=7, page_size=2**31 - 1))
    assert [r.user_id for r in clamped.requests] == [2, 1]
    mutes = await _mutes(1)(stub, tokens.mutes_1)
    assert [(m.user_id, m.notifications) for m in mutes.mutes] == [(3, True)]
    assert mutes.next_page_token == ""
    mutes = await _mutes(9)(stub, tokens.mutes_9)
    assert [(m.user_id, m.notifications) for m in mutes.mutes] == [(2, False)]


# -- requests that do not exist, and calls that are no-ops ----------------------------------------------


@pytest.mark.parametrize(
    ("user", "requester"),
    [(7, 5), (1, 7), (2, 9), (10, 9), (7, PROBE), (8, 7)],
    ids=["never-asked", "reversed", "public-no-edge", "blocked-pair", "unknown-account", "private-to-private"],
)
async def test_accept_of_a_nonexistent_request_is_not_found(graph: World, user: int, requester: int) -> None:
    """Accept with neither a request nor a follow is NOT_FOUND / FOLLOW_REQUEST_NOT_FOUND and makes no edge."""
    info = await rejected(
        graph.stub.AcceptFollowRequest(pb.AcceptFollowRequestRequest(user_id=user, requester_id=requester)),
        grpc.StatusCode.NOT_FOUND,
        "FOLLOW_REQUEST_NOT_FOUND",
    )
    assert info.metadata["user_id"] == str(user)
    assert info.metadata["requester_id"] == str(requester)


NO_OPS: list[tuple[str, Call]] = [
    (
        "Accept of an existing follow",
        lambda s: s.AcceptFollowRequest(pb.AcceptFollowRequestRequest(user_id=2, requester_id=3)),
    ),
    ("Reject never asked", lambda s: s.RejectFollowRequest(pb.RejectFollowRequestRequest(user_id=7, requester_id=5))),
    ("Reject reversed", lambda s: s.RejectFollowRequest(pb.RejectFollowRequestRequest(user_id=1, requester_id=7))),
    ("Unblock never blocked", lambda s: s.Unblock(pb.UnblockRequest(blocker_id=1, blocked_id=2))),
    ("Unblock by the blocked side", lambda s: s.Unblock(pb.UnblockRequest(blocker_id=1, blocked_id=10))),
    ("Block again", lambda s: s.Block(pb.BlockRequest(blocker_id=9, blocked_id=10))),
    ("RemoveFollower not a follower", lambda s: s.RemoveFollower(pb.RemoveFollowerRequest(user_id=2, follower_id=9))),
    ("RemoveFollower reversed", lambda s: s.RemoveFollower(pb.RemoveFollowerRequest(user_id=1, follower_id=3))),
    ("Unfollow never followed", lambda s: s.Unfollow(pb.UnfollowRequest(follower_id=5, followee_id=7))),
    ("SetPrivacy private again", lambda s: s.SetPrivacy(pb.SetPrivacyRequest(user_id=7, private=True))),
    ("SetPrivacy public again", lambda s: s.SetPrivacy(pb.SetPrivacyRequest(user_id=2, private=False))),
    ("Mute again as it is", lambda s: s.Mute(pb.MuteRequest(muter_id=1, muted_id=3, notifications=True))),
    ("Unmute never muted", lambda s: s.Unmute(pb.UnmuteRequest(muter_id=1, muted_id=5))),
    ("Unmute by the muted side", lambda s: s.Unmute(pb.UnmuteRequest(muter_id=3, muted_id=1))),
]


@pytest.mark.parametrize("call", [c for _, c in NO_OPS], ids=[n for n, _ in NO_OPS])
async def test_idempotent_no_op_succeeds_and_changes_nothing(graph: World, call: Call) -> None:
    """Valid calls with nothing to do succeed and leave the graph (and privacy) as it was."""
    await call(graph.stub)
    await call(graph.stub)
    await assert_privacy_unchanged(graph.stub)


async def test_blocked_follow_changes_nothing(graph: World) -> None:
    """Follow across a block (either way, also a would-be request) is BLOCKED and leaves no edge or request."""
    for follower, followee in [(9, 10), (10, 9), (1, 10), (10, 1), (5, 8), (8, 5)]:
        await rejected(
            graph.stub.Follow(pb.FollowRequest(follower_id=follower, followee_id=followee)),
            grpc.StatusCode.FAILED_PRECONDITION,
            "BLOCKED",
        )


# -- mute durations -------------------------------------------------------------------------------------

YEAR_S = 366 * 86_400
BAD_DURATIONS = [
    ("negative", duration_pb2.Duration(seconds=-1)),
    ("negative nanos", duration_pb2.Duration(nanos=-1)),
    ("over 100 years", duration_pb2.Duration(seconds=100 * YEAR_S, nanos=1)),
    ("absurd", duration_pb2.Duration(seconds=2**62)),
    ("most negative", duration_pb2.Duration(seconds=-(2**63))),
    ("seconds and nanos disagree", duration_pb2.Duration(seconds=1, nanos=-1)),
    ("nanos past a second", duration_pb2.Duration(nanos=1_000_000_000)),
]


@pytest.mark.parametrize("duration", [d for _, d in BAD_DURATIONS], ids=[n for n, _ in BAD_DURATIONS])
async def test_a_bad_mute_duration_is_invalid_duration(graph: World, duration: duration_pb2.Duration) -> None:
    """A negative, malformed or over-100-years duration is INVALID_ARGUMENT / INVALID_DURATION naming the field,
    also for a pair already muted (whose mute stays as it was)."""
    for muted in (5, 3):
        request = pb.MuteRequest(muter_id=1, muted_id=muted, duration=duration)
        info = await rejected(graph.stub.Mute(request), INVALID, "INVALID_DURATION")
        assert info.metadata["field"] == "duration"
    assert await relationships(graph.stub, 1, [3, 5]) == [(3, MODEL.relationship(1, 3)), (5, MODEL.relationship(1, 5))]
    assert {"muting", "muting_notifications"} <= MODEL.relationship(1, 3)
