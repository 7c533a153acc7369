"""Blocks, RemoveFollower and GetRelationships against the real servers (single Redis and a 3-master cluster).

Every scenario is checked against a model of the graph (edges, pending requests, blocks): through
the cached server right after the writes return (no waiting), through a cache-less server that
reads DynamoDB, and through the counters consumer (counts eventually exact).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
import redis.asyncio as aioredis
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph_devstack.processes import free_port, start_redis

from graph_service.domain.models import Direction
from graph_service.entrypoints.server import ServerRuntime
from graph_service.settings import Settings
from tests.support.graph_calls import (
    NONE,
    Flags,
    Model,
    Pair,
    Stub,
    accept,
    all_counts,
    block,
    counts_of,
    error_info,
    follow,
    ids,
    is_following,
    reject,
    rejected,
    relationships,
    remove_follower,
    requests_of,
    set_private,
    truth_stub,
    unblock,
    unfollow,
)
from tests.support.polling import eventually
from tests.support.runtimes import make_settings, running_counters, running_server, stub_for
from tests.support.tables import create_tables

FOLLOWING = pb.FOLLOW_STATE_FOLLOWING
REQUESTED = pb.FOLLOW_STATE_REQUESTED


# -- environment ----------------------------------------------------------------------------------


@dataclass
class Env:
    """A cached server (with its stub), a cache-less server on the same tables, and the counters consumer."""

    settings: Settings
    server: ServerRuntime
    stub: Stub
    truth: Stub


@pytest.fixture
def without_counters() -> None:
    """Asked for by a test that checks no counts: its ``env`` runs no counters consumer, on tables
    without streams (otherwise the consumer's stream reads and count writes follow every write)."""


@pytest.fixture(params=["redis", pytest.param("cluster", marks=pytest.mark.cluster)])
async def env(request: pytest.FixtureRequest, dynamodb_local: str) -> AsyncIterator[Env]:
    """Fresh tables, a clean cache (one Redis node or the 3-master cluster), a server, a truth server,
    counters (unless the test asks for ``without_counters``)."""
    if request.param == "cluster":
        ports: list[int] = request.getfixturevalue("redis_cluster")
        request.getfixturevalue("flushed_cluster")
        settings = make_settings(dynamodb_local, f"redis://127.0.0.1:{ports[0]}/0", redis_cluster=True)
    else:
        settings = make_settings(dynamodb_local, request.getfixturevalue("redis_url"))
    counted = "without_counters" not in request.fixturenames
    await create_tables(settings, streams=counted)
    async with (
        running_server(settings) as server,
        stub_for(server.port) as stub,
        truth_stub(settings) as truth,
        running_counters(settings) if counted else contextlib.nullcontext(),
    ):
        yield Env(settings, server, stub, truth)


SINGLE_NODE = pytest.mark.parametrize("env", ["redis"], indirect=True)
"""For a scenario whose subject is the store's conditions, not where the cache keeps its entries: the
cluster runs the scenarios that write and read every kind of cached entry (the first and the last
two), which is where a cluster differs; running every scenario twice cost CI about 40 s."""


# -- calls ----------------------------------------------------------------------------------------


async def blocked(stub: Stub, follower: int, followee: int) -> None:
    """Follow fails FAILED_PRECONDITION / BLOCKED, naming both accounts."""
    info = await rejected(
        stub.Follow(pb.FollowRequest(follower_id=follower, followee_id=followee)),
        grpc.StatusCode.FAILED_PRECONDITION,
        "BLOCKED",
    )
    assert info.metadata["follower_id"] == str(follower)
    assert info.metadata["followee_id"] == str(followee)


async def rel(stub: Stub, actor: int, target: int) -> Flags:
    ((target_id, flags),) = await relationships(stub, actor, [target])
    assert target_id == target
    return flags


# -- the model --------------------------------------------------------------------------------------


async def assert_graph(stub: Stub, users: Sequence[int], model: Model, where: str = "") -> None:
    """Lists, IsFollowing, follow requests and GetRelationships of ``users`` all match ``model`` (no waiting)."""
    pairs = [(a, b) for a in users for b in users if a != b]

    async def check_user(user: int) -> None:
        followers = await ids(stub, Direction.FOLLOWERS, user)
        following = await ids(stub, Direction.FOLLOWING, user)
        assert len(set(followers)) == len(followers), where
        assert set(followers) == {a for a, b in model.edges if b == user}, f"{where} followers of {user}"
        assert set(following) == {b for a, b in model.edges if a == user}, f"{where} following of {user}"
        assert set(await requests_of(stub, user)) == {a for a, b in model.requests if b == user}, (
            f"{where} requests to {user}"
        )
        got = await relationships(stub, user, users)
        assert got == [(t, model.relationship(user, t)) for t in users], f"{where} relationships of {user}"

    states = await asyncio.gather(*(is_following(stub, p) for p in pairs))
    assert {p for p, s in zip(pairs, states, strict=True) if s} == {p for p in model.edges if p in pairs}, where
    await asyncio.gather(*(check_user(u) for u in users))


async def assert_everywhere(env: Env, users: Sequence[int], model: Model) -> None:
    """The cached server answers ``model`` now (read first, before any other reader), and so does DynamoDB."""
    await assert_graph(env.stub, users, model, "cached:")
    await assert_graph(env.truth, users, model, "truth:")


async def assert_counts(env: Env, users: Sequence[int], model: Model) -> None:
    """Counts (written by the consumer from the stream) reach the model's edge counts."""
    expected = counts_of(model.edges, users)
    await eventually(lambda: all_counts(env.stub, users), lambda got: got == expected, timeout=30)
    assert await truth_edge_set(env.truth, users) == {p for p in model.edges if set(p) <= set(users)}


async def truth_edge_set(truth: Stub, users: Sequence[int]) -> set[Pair]:
    """Every edge touching ``users`` as DynamoDB lists it; both directions' lists must agree."""
    followers = await asyncio.gather(*(ids(truth, Direction.FOLLOWERS, u) for u in users))
    following = await asyncio.gather(*(ids(truth, Direction.FOLLOWING, u) for u in users))
    by_followers = {(other, u) for u, found in zip(users, followers, strict=True) for other in found}
    by_following = {(u, other) for u, found in zip(users, following, strict=True) for other in found}
    inside = set(users)
    assert {p for p in by_followers if p[0] in inside} == {p for p in by_following if p[1] in inside}
    return {p for p in by_followers | by_following if set(p) <= inside}


# -- 1. Block removes every tie -----------------------------------------------------------------------


async def test_block_removes_follows_and_requests_in_both_directions(env: Env) -> None:
    """Block removes edges and pending requests both ways; every reader agrees at once; counts follow."""
    stub = env.stub
    users = list(range(1, 9))
    # 1 <-> 2 follow each other; 3 and 4 (private) ask each other; 5 -> 6 follows and 6 asks private 5.
    assert await follow(stub, 1, 2) == FOLLOWING
    assert await follow(stub, 2, 1) == FOLLOWING
    await set_private(stub, 3, True)
    await set_private(stub, 4, True)
    assert await follow(stub, 3, 4) == REQUESTED
    assert await follow(stub, 4, 3) == REQUESTED
    assert await follow(stub, 5, 6) == FOLLOWING
    await set_private(stub, 5, True)
    assert await follow(stub, 6, 5) == REQUESTED
    # Bystanders the blocks must not touch.
    for pair in [(7, 1), (7, 2), (1, 8), (2, 8), (7, 5), (6, 8)]:
        assert await follow(stub, *pair) in (FOLLOWING, REQUESTED)
    before = Model(
        edges={(1, 2), (2, 1), (5, 6), (7, 1), (7, 2), (1, 8), (2, 8), (6, 8)},
        requests={(3, 4), (4, 3), (6, 5), (7, 5)},
    )
    await assert_everywhere(env, users, before)  # also warms every cache entry the blocks must change
    await assert_counts(env, users, before)

    await block(stub, 1, 2)  # mutual follows
    await block(stub, 4, 3)  # mutual requests
    await block(stub, 6, 5)  # the blocker follows the blocked, the blocked asked to follow the blocker
    after = Model(
        edges={(7, 1), (7, 2), (1, 8), (2, 8), (6, 8)},
        requests={(7, 5)},
        blocks={(1, 2), (4, 3), (6, 5)},
    )
    await assert_everywhere(env, users, after)
    await assert_counts(env, users, after)
    assert await all_counts(stub, [1, 2, 5, 6]) == {1: (1, 1), 2: (1, 1), 5: (0, 0), 6: (0, 1)}


# -- 2. Follows across a block --------------------------------------------------------------------------


@SINGLE_NODE
async def test_block_prevents_follows_either_way_until_unblocked(env: Env) -> None:
    """After Block, Follow either way (also a would-be request) is BLOCKED; Block and Unblock are idempotent;
    Unblock restores nothing but allows follows again."""
    stub = env.stub
    users = list(range(1, 7))
    assert await follow(stub, 1, 2) == FOLLOWING
    assert await follow(stub, 2, 1) == FOLLOWING
    await block(stub, 1, 2)
    await blocked(stub, 1, 2)
    await blocked(stub, 2, 1)
    await set_private(stub, 3, True)
    await set_private(stub, 4, True)
    await block(stub, 3, 4)
    await blocked(stub, 4, 3)  # would be a request to private 3
    await blocked(stub, 3, 4)  # would be a request to private 4, by the blocker itself
    model = Model(blocks={(1, 2), (3, 4)})
    await assert_everywhere(env, users, model)

    await block(stub, 1, 2)  # twice: OK, nothing changes
    await assert_graph(stub, users, model)
    await block(stub, 2, 1)  # both sides block
    model.blocks.add((2, 1))
    await assert_graph(stub, users, model)
    await unblock(stub, 1, 2)  # 2 still blocks 1
    model.blocks.discard((1, 2))
    await blocked(stub, 1, 2)
    await blocked(stub, 2, 1)
    await assert_graph(stub, users, model)
    await unblock(stub, 2, 1)
    model.blocks.discard((2, 1))
    await assert_graph(stub, users, model)  # no edge came back
    await unblock(stub, 2, 1)  # twice: OK
    await unblock(stub, 5, 6)  # never blocked: OK, and makes no block
    await unblock(stub, 6, 5)
    await assert_graph(stub, users, model)
    assert await follow(stub, 2, 1) == FOLLOWING
    assert await follow(stub, 5, 6) == FOLLOWING
    assert await follow(stub, 6, 5) == FOLLOWING
    model.edges |= {(2, 1), (5, 6), (6, 5)}
    await unblock(stub, 3, 4)
    model.blocks.discard((3, 4))
    assert await follow(stub, 4, 3) == REQUESTED  # 3 is still private
    model.requests.add((4, 3))
    await assert_everywhere(env, users, model)
    await assert_counts(env, users, model)


# -- 3. Follow racing Block ------------------------------------------------------------------------------


async def try_follow(stub: Stub, follower: int, followee: int) -> str:
    """Follow that may lose a race against a block: 'following', 'requested' or 'blocked'."""
    failure: grpc.aio.AioRpcError | None = None
    try:
        state = (await stub.Follow(pb.FollowRequest(follower_id=follower, followee_id=followee))).state
    except grpc.aio.AioRpcError as error:
        failure = error
    if failure is not None:
        assert failure.code() == grpc.StatusCode.FAILED_PRECONDITION, failure.details()
        assert error_info(failure).reason == "BLOCKED"
        return "blocked"
    assert state in (FOLLOWING, REQUESTED)
    return "following" if state == FOLLOWING else "requested"


RACE_ROUNDS = (0, 1, 2, 3, 7, 9)
"""Rounds vary by round number modulo 2 (an edge first, and which server follows), 3 (cache warmed
and the block first, or neither: 1 and 2 are alike) and 4 (a private followee, only in odd rounds):
rounds 0 to 11 make six different combinations, these six rounds one each (the other six repeated
them)."""


@SINGLE_NODE
async def test_follow_racing_block_never_leaves_an_edge(env: Env) -> None:
    """Follow and Block of one pair at once, on two servers, 12 times (the follower blocks, or the followee;
    6 rounds are every combination of the rounds' variations): never an edge or request afterwards, both
    servers show the block at once, and the counts end exact."""
    outcomes: dict[str, int] = {}
    races: list[tuple[int, int, int, int]] = []  # (follower, followee, blocker, blocked)
    private: set[int] = set()
    marker = 1
    async with running_server(env.settings) as other, stub_for(other.port) as second:
        stubs = (env.stub, second)

        async def race(round_no: int, a: int, b: int, blocker_follows: bool) -> None:
            blocker, blocked_id = (a, b) if blocker_follows else (b, a)
            if round_no % 2:
                assert await follow(stubs[1], b, a) == FOLLOWING  # an edge the block must remove as well
            if round_no % 4 == 3:
                await set_private(stubs[0], b, True)  # the follow is a would-be request
                private.add(b)
            if round_no % 3 == 0:  # warm the cache entries the block must invalidate
                for s in stubs:
                    await is_following(s, (a, b))
                    await relationships(s, a, [b])
                    await relationships(s, b, [a])
            follow_stub, block_stub = (stubs[0], stubs[1]) if round_no % 2 else (stubs[1], stubs[0])
            if round_no % 3:
                outcome, _ = await asyncio.gather(try_follow(follow_stub, a, b), block(block_stub, blocker, blocked_id))
            else:
                _, outcome = await asyncio.gather(block(block_stub, blocker, blocked_id), try_follow(follow_stub, a, b))
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            checks = [
                *(is_following(s, pair) for s in stubs for pair in ((a, b), (b, a))),
                *(rel(s, x, y) for s in stubs for x, y in ((blocker, blocked_id), (blocked_id, blocker))),
            ]
            got = await asyncio.gather(*checks)  # no waiting: both servers know at once
            assert got == [False] * 4 + [frozenset({"blocking"}), frozenset({"blocked_by"})] * 2, (a, b, outcome)
            races.append((a, b, blocker, blocked_id))

        users = iter(range(1001, 2000))
        for at in range(0, len(RACE_ROUNDS), 3):  # three rounds, six races, at a time
            await asyncio.gather(
                *(
                    race(r, next(users), next(users), blocker_follows)
                    for r in RACE_ROUNDS[at : at + 3]
                    for blocker_follows in (False, True)
                )
            )
        assert sum(outcomes.values()) == 2 * len(RACE_ROUNDS), outcomes

        raced = sorted({u for a, b, _, _ in races for u in (a, b)})
        await asyncio.gather(
            *(assert_graph(env.truth, [a, b], Model(blocks={(blocker, bd)}), "truth:") for a, b, blocker, bd in races)
        )
        await asyncio.gather(*(blocked(second, a, b) for a, b, _, _ in races))
        # Public again: nothing is pending, so nothing may be accepted into an edge.
        await asyncio.gather(*(set_private(env.stub, user, False) for user in private))
        # A last write per user after the races: counts that include it were made after the races' records.
        states = await asyncio.gather(*(follow(env.stub, marker, user) for user in raced))
        assert set(states) == {FOLLOWING}
        model = Model(edges={(marker, u) for u in raced})
        await assert_counts(env, [marker, *raced], model)
        assert await all_counts(env.stub, [marker]) == {marker: (0, len(raced))}


# -- 4. Block while a request is pending -----------------------------------------------------------------


@SINGLE_NODE
async def test_block_while_a_request_is_pending_drops_it(env: Env) -> None:
    """A pending request is gone after a Block by either side; Follow is then BLOCKED and Accept finds nothing."""
    stub = env.stub
    users = [1, 2, 3, 4, 5]
    await set_private(stub, 1, True)
    await set_private(stub, 3, True)
    assert await follow(stub, 2, 1) == REQUESTED
    assert await follow(stub, 5, 1) == REQUESTED
    assert await follow(stub, 4, 3) == REQUESTED
    await assert_everywhere(env, users, Model(requests={(2, 1), (5, 1), (4, 3)}))

    await block(stub, 1, 2)  # the private account blocks the requester
    await block(stub, 4, 3)  # the requester blocks the private account
    model = Model(requests={(5, 1)}, blocks={(1, 2), (4, 3)})
    await assert_everywhere(env, users, model)
    assert await requests_of(stub, 1) == [5]
    assert await requests_of(stub, 3) == []
    await blocked(stub, 2, 1)
    await blocked(stub, 4, 3)
    await blocked(stub, 3, 4)
    await rejected(
        stub.AcceptFollowRequest(pb.AcceptFollowRequestRequest(user_id=1, requester_id=2)),
        grpc.StatusCode.NOT_FOUND,
        "FOLLOW_REQUEST_NOT_FOUND",
    )
    await set_private(stub, 1, False)  # accepts what is pending: 5's request, never 2's
    model.requests.clear()
    model.edges.add((5, 1))
    await assert_everywhere(env, users, model)
    await assert_counts(env, users, model)


# -- 5. RemoveFollower ------------------------------------------------------------------------------------


@SINGLE_NODE
async def test_remove_follower_drops_the_follower_without_blocking(env: Env) -> None:
    """RemoveFollower takes the follower out of both lists and the counts, blocks nothing, is idempotent,
    and also drops a pending request from that account."""
    stub = env.stub
    users = [1, 2, 3, 4, 5]
    for pair in [(2, 1), (1, 2), (3, 1), (2, 3)]:
        assert await follow(stub, *pair) == FOLLOWING
    model = Model(edges={(2, 1), (1, 2), (3, 1), (2, 3)})
    await assert_everywhere(env, users, model)
    await assert_counts(env, users, model)

    await remove_follower(stub, 1, 2)
    model.edges.discard((2, 1))  # the reverse follow 1 -> 2 stays
    await assert_everywhere(env, users, model)
    await assert_counts(env, users, model)
    await remove_follower(stub, 1, 2)  # twice: OK
    await remove_follower(stub, 1, 5)  # never a follower: OK
    await remove_follower(stub, 5, 1)
    await assert_graph(stub, users, model)
    assert await follow(stub, 2, 1) == FOLLOWING  # no block was made
    model.edges.add((2, 1))

    await set_private(stub, 1, True)
    assert await follow(stub, 4, 1) == REQUESTED
    assert await follow(stub, 5, 1) == REQUESTED
    await remove_follower(stub, 1, 4)
    model.requests.add((5, 1))
    await assert_everywhere(env, users, model)
    assert await follow(stub, 4, 1) == REQUESTED  # again: no block
    model.requests.add((4, 1))
    await assert_everywhere(env, users, model)
    await assert_counts(env, users, model)


# -- 6. GetRelationships ------------------------------------------------------------------------------------


async def test_get_relationships_reports_all_six_flags_in_request_order(env: Env, without_counters: None) -> None:
    """Each flag for a crafted target, combinations, duplicates once each in request order, the actor itself
    all false, an empty list answered empty, and a warm second call identical."""
    stub = env.stub
    actor = 1
    assert await follow(stub, actor, 2) == FOLLOWING  # 2: following
    assert await follow(stub, 3, actor) == FOLLOWING  # 3: followed_by
    assert await follow(stub, actor, 4) == FOLLOWING  # 4: following + followed_by
    assert await follow(stub, 4, actor) == FOLLOWING
    await set_private(stub, 5, True)
    assert await follow(stub, actor, 5) == REQUESTED  # 5: requested
    assert await follow(stub, 7, actor) == FOLLOWING  # 7: followed_by + requested
    await set_private(stub, 7, True)
    assert await follow(stub, actor, 7) == REQUESTED
    assert await follow(stub, actor, 12) == FOLLOWING  # 12: following + requested_by
    await set_private(stub, actor, True)
    assert await follow(stub, 6, actor) == REQUESTED  # 6: requested_by
    assert await follow(stub, 12, actor) == REQUESTED
    await block(stub, actor, 8)  # 8: blocking
    await block(stub, 9, actor)  # 9: blocked_by
    await block(stub, actor, 10)  # 10: blocking + blocked_by
    await block(stub, 10, actor)
    expected = {
        2: {"following"},
        3: {"followed_by"},
        4: {"following", "followed_by"},
        5: {"requested"},
        6: {"requested_by"},
        7: {"followed_by", "requested"},
        8: {"blocking"},
        9: {"blocked_by"},
        10: {"blocking", "blocked_by"},
        11: set(),  # a stranger
        12: {"following", "requested_by"},
        actor: set(),  # the actor itself
        2**64 - 1: set(),
    }
    targets = [9, 2, 2**64 - 1, 3, 4, 2, actor, 5, 6, 7, 8, 9, 10, 11, 12, 4, actor]
    want = [(t, frozenset(expected[t])) for t in targets]
    cold = await relationships(stub, actor, targets)
    assert cold == want
    assert await relationships(stub, actor, targets) == want  # warm
    assert await relationships(env.truth, actor, targets) == want
    assert await relationships(stub, actor, []) == []
    assert await relationships(stub, actor, [actor]) == [(actor, NONE)]
    # The other side sees the mirror image.
    mirror = {"following": "followed_by", "requested": "requested_by", "blocking": "blocked_by"}
    mirror |= {v: k for k, v in mirror.items()}
    for target in [t for t in expected if t != actor]:
        assert await rel(stub, target, actor) == frozenset(mirror[f] for f in expected[target]), target


async def test_get_relationships_is_never_stale_after_a_write(env: Env, without_counters: None) -> None:
    """With both sides' answers warm in the cache, every kind of write shows in GetRelationships at once."""
    stub = env.stub
    a, b = 20, 21

    async def step(write: Awaitable[Any], expected_a: set[str], expected_b: set[str]) -> None:
        for _ in range(2):  # warm both views
            await relationships(stub, a, [b, a])
            await relationships(stub, b, [a])
        await write
        assert await relationships(stub, a, [b, a]) == [(b, frozenset(expected_a)), (a, NONE)]
        assert await relationships(stub, b, [a]) == [(a, frozenset(expected_b))]
        assert await rel(env.truth, a, b) == frozenset(expected_a)

    await step(follow(stub, a, b), {"following"}, {"followed_by"})
    await step(set_private(stub, a, True), {"following"}, {"followed_by"})
    await step(follow(stub, b, a), {"following", "requested_by"}, {"followed_by", "requested"})
    await step(accept(stub, a, b), {"following", "followed_by"}, {"following", "followed_by"})
    await step(unfollow(stub, a, b), {"followed_by"}, {"following"})
    await step(block(stub, a, b), {"blocking"}, {"blocked_by"})
    await step(block(stub, b, a), {"blocking", "blocked_by"}, {"blocking", "blocked_by"})
    await step(unblock(stub, a, b), {"blocked_by"}, {"blocking"})
    await step(unblock(stub, b, a), set(), set())
    await step(follow(stub, b, a), {"requested_by"}, {"requested"})
    await step(reject(stub, a, b), set(), set())
    await step(follow(stub, b, a), {"requested_by"}, {"requested"})
    await step(unfollow(stub, b, a), set(), set())  # withdraws the request
    await step(follow(stub, b, a), {"requested_by"}, {"requested"})
    await step(remove_follower(stub, a, b), set(), set())  # drops the request
    await step(follow(stub, b, a), {"requested_by"}, {"requested"})
    await step(block(stub, b, a), {"blocked_by"}, {"blocking"})  # the requester blocks: request gone
    await step(unblock(stub, b, a), set(), set())
    await step(follow(stub, b, a), {"requested_by"}, {"requested"})
    await step(set_private(stub, a, False), {"followed_by"}, {"following"})  # accepts the request
    await step(follow(stub, a, b), {"following", "followed_by"}, {"following", "followed_by"})
    await step(remove_follower(stub, a, b), {"following"}, {"followed_by"})


# -- 7. Warm GetRelationships costs a constant number of Redis commands --------------------------------------


async def commands_processed(client: aioredis.Redis) -> dict[str, int]:
    """Calls per command since the Redis server started, not counting our own INFO calls."""
    stats = await client.info("commandstats")
    return {name: int(value["calls"]) for name, value in stats.items() if name != "cmdstat_info"}


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    changed = {name: calls - before.get(name, 0) for name, calls in after.items()}
    return {name: n for name, n in changed.items() if n}


@pytest.fixture
async def private_redis(tmp_path: Path) -> AsyncIterator[int]:
    """A redis-server of this test alone, so every command it counts came from the server under test."""
    proc = start_redis(free_port(), tmp_path / "logs", tmp_path / "redis", name="redis-private")
    try:
        yield proc.port
    finally:
        proc.stop()


async def test_warm_get_relationships_costs_a_constant_number_of_redis_commands(
    dynamodb_local: str, private_redis: int
) -> None:
    """A warm GetRelationships of 100 targets is served in one round trip of the same commands as for 10 or 1."""
    settings = make_settings(dynamodb_local, f"redis://127.0.0.1:{private_redis}/0")
    await create_tables(settings, streams=False)
    actor = 1
    targets = list(range(2, 102))
    async with (
        running_server(settings) as server,
        stub_for(server.port) as stub,
        truth_stub(settings) as truth,
    ):
        for target in targets[:5]:
            await follow(stub, actor, target)
        for target in targets[3:8]:
            await follow(stub, target, actor)
        await block(stub, actor, targets[50])
        await block(stub, targets[60], actor)
        want = await relationships(truth, actor, targets)
        assert sum(1 for _, flags in want if flags) == 10
        assert await relationships(stub, actor, targets) == want  # fills the cache
        assert await relationships(stub, actor, targets) == want  # warm

        assert server.lease is not None
        await server.lease.aclose()  # its renewals every half second would be counted too
        client = aioredis.Redis(port=private_redis, single_connection_client=True)
        try:
            costs: dict[int, dict[str, int]] = {}
            for size in (100, 10, 1, 100):
                before = await commands_processed(client)
                assert await relationships(stub, actor, targets[:size]) == want[:size]
                costs[size] = delta(before, await commands_processed(client))
            idle_before = await commands_processed(client)
            idle = delta(idle_before, await commands_processed(client))
        finally:
            await client.aclose()
    assert idle == {}, "something else talks to the private Redis"
    # Two round trips, each the trust check (EVALSHA, and the GET and ZRANGE it runs: no lease, no
    # TIME) and one MGET: the relationships, and the lifecycle states of the actor and the targets
    # (SPEC §3b; in production the near cache answers the states of the accounts it has seen).
    assert costs[100] == {
        "cmdstat_evalsha": 2,
        "cmdstat_get": 2,
        "cmdstat_zrange": 2,
        "cmdstat_mget": 2,
    }, costs
    assert costs[100] == costs[10] == costs[1], costs
