"""The graph rules of the service layer, on the in-memory graph (no server)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from graph_service.domain.errors import (
    BatchTooLarge,
    Blocked,
    DomainError,
    InvalidLimit,
    InvalidPageSize,
    InvalidPageToken,
    InvalidUserId,
    RequestNotFound,
    SelfFollow,
    SelfRelation,
    Unavailable,
)
from graph_service.domain.ids import MAX_ID
from graph_service.domain.models import Counts, Direction, Edge, FollowState, PairState, Relationship
from graph_service.entrypoints.rule_limits import rule_limits
from graph_service.rules.graph import GraphRules
from graph_service.settings import Settings
from tests.support.contracts.follow_budget import ManualClock
from tests.support.fakes.changes import RecordingChanges
from tests.support.fakes.follow_budget import FakeFollowBudget
from tests.support.fakes.graph import FakeGraph
from tests.support.rules import rules_on

SETTINGS = Settings(page_token_secret="unit-test-secret")


def make_service(
    graph: FakeGraph,
    settings: Settings = SETTINGS,
    changes: RecordingChanges | None = None,
    clock: ManualClock | None = None,
) -> GraphRules:
    return rules_on(graph, rule_limits(settings), changes=changes, budget=FakeFollowBudget(clock or ManualClock()))


@pytest.fixture
def graph() -> FakeGraph:
    return FakeGraph()


@pytest.fixture
def changes() -> RecordingChanges:
    return RecordingChanges()


@pytest.fixture
def service(graph: FakeGraph, changes: RecordingChanges) -> GraphRules:
    return make_service(graph, changes=changes)


# -- follow ------------------------------------------------------------------------------------


async def test_a_follow_of_a_public_account_makes_the_edge_once(graph: FakeGraph, service: GraphRules) -> None:
    assert await service.follows.follow(1, 2) is FollowState.FOLLOWING
    first = graph.edges[(1, 2)]
    assert await service.follows.follow(1, 2) is FollowState.FOLLOWING  # a repeat: the same state, nothing new
    assert graph.edges == {(1, 2): first}
    assert await service.queries.is_following(1, 2)
    assert not await service.queries.is_following(2, 1)


async def test_a_follow_of_a_private_account_is_a_request(graph: FakeGraph, service: GraphRules) -> None:
    await service.requests.set_privacy(2, True)
    assert await service.follows.follow(1, 2) is FollowState.REQUESTED
    assert await service.follows.follow(1, 2) is FollowState.REQUESTED
    assert (1, 2) in graph.requests
    assert (1, 2) not in graph.edges
    assert not await service.queries.is_following(1, 2)
    page = await service.requests.list_requests(2, 0, "")
    assert [e.user_id for e in page.entries] == [1]


async def test_following_oneself_is_refused(service: GraphRules) -> None:
    with pytest.raises(SelfFollow) as refused:
        await service.follows.follow(3, 3)
    assert refused.value.metadata == {"user_id": "3"}
    assert not await service.queries.is_following(3, 3)


@pytest.mark.parametrize(("follower", "followee", "field"), [(0, 2, "follower_id"), (1, MAX_ID + 1, "followee_id")])
async def test_ids_outside_uint64_above_zero_are_refused(
    graph: FakeGraph, service: GraphRules, follower: int, followee: int, field: str
) -> None:
    with pytest.raises(InvalidUserId) as refused:
        await service.follows.follow(follower, followee)
    assert refused.value.metadata == {"field": field}
    assert graph.writes == 0


async def test_a_block_either_way_refuses_the_follow(graph: FakeGraph, service: GraphRules) -> None:
    await service.blocks.block(2, 1)
    for follower, followee in ((1, 2), (2, 1)):
        with pytest.raises(Blocked) as refused:
            await service.follows.follow(follower, followee)
        assert refused.value.metadata == {"follower_id": str(follower), "followee_id": str(followee)}
    assert not graph.edges
    assert not graph.requests


async def test_a_follow_finds_a_request_left_over_on_a_public_account_and_accepts_it(
    graph: FakeGraph, service: GraphRules
) -> None:
    graph.requests[(1, 2)] = 100  # left by an account that turned public while the sweep failed
    assert await service.follows.follow(1, 2) is FollowState.FOLLOWING
    assert (1, 2) not in graph.requests
    assert (1, 2) in graph.edges


async def test_a_request_made_as_the_account_turns_public_is_accepted_by_its_follower(
    graph: FakeGraph, service: GraphRules
) -> None:
    """The follow read "private", and the account's sweep ran before the request existed: the follow
    itself sees the account public after its commit, and accepts its own request."""
    await service.requests.set_privacy(2, True)

    async def turn_public(write: str) -> None:
        if write == "add_request":
            graph.private[2] = False  # the sweep of SetPrivacy(public) runs now, before the request exists

    graph.before_write = turn_public
    assert await service.follows.follow(1, 2) is FollowState.FOLLOWING
    assert (1, 2) in graph.edges
    assert not graph.requests


async def test_a_follow_racing_an_unfollow_tries_again(graph: FakeGraph, service: GraphRules) -> None:
    """The follow's write is refused by an edge that an unfollow removes before the pair is read:
    the follow decides again, and makes a new edge."""
    graph.edges[(1, 2)] = 100
    original_pair = graph.pair

    async def pair_after_an_unfollow(actor: int, target: int) -> PairState:
        graph.edges.pop((1, 2), None)
        graph.pair = original_pair  # type: ignore[method-assign]  # the real read again
        return await original_pair(actor, target)

    graph.pair = pair_after_an_unfollow  # type: ignore[method-assign]  # the race, in place
    assert await service.follows.follow(1, 2) is FollowState.FOLLOWING
    assert graph.writes == 2
    assert graph.edges[(1, 2)] != 100


async def test_a_follow_that_keeps_losing_races_is_unavailable(graph: FakeGraph, service: GraphRules) -> None:
    """Something refuses every write and is gone whenever the pair is read: after 8 rounds the call
    gives up as UNAVAILABLE (safe to retry) instead of looping."""

    async def always_refuse(write: str) -> None:
        graph.edges[(1, 2)] = 1

    original_pair = graph.pair

    async def pair_after_the_racer_left(actor: int, target: int) -> PairState:
        graph.edges.pop((1, 2), None)
        return await original_pair(actor, target)

    graph.before_write = always_refuse
    graph.pair = pair_after_the_racer_left  # type: ignore[method-assign]  # the race, in place
    with pytest.raises(Unavailable):
        await service.follows.follow(1, 2)
    assert graph.writes == 8


# -- unfollow, remove follower -----------------------------------------------------------------


async def test_unfollow_removes_the_edge_and_is_idempotent(graph: FakeGraph, service: GraphRules) -> None:
    await service.follows.follow(1, 2)
    await service.follows.unfollow(1, 2)
    await service.follows.unfollow(1, 2)
    await service.follows.unfollow(5, 5)  # never an edge: nothing to do, no error
    assert not graph.edges
    assert not await service.queries.is_following(1, 2)


async def test_unfollow_withdraws_a_pending_request(graph: FakeGraph, service: GraphRules) -> None:
    await service.requests.set_privacy(2, True)
    await service.follows.follow(1, 2)
    await service.follows.unfollow(1, 2)
    assert not graph.requests
    assert (await service.requests.list_requests(2, 0, "")).entries == []


async def test_remove_follower_drops_the_follower_and_blocks_nothing(graph: FakeGraph, service: GraphRules) -> None:
    await service.follows.follow(1, 2)
    await service.follows.remove_follower(2, 1)
    assert not graph.edges
    assert not graph.blocks
    assert await service.follows.follow(1, 2) is FollowState.FOLLOWING
    with pytest.raises(SelfRelation):
        await service.follows.remove_follower(2, 2)


# -- requests and privacy ----------------------------------------------------------------------


async def test_accept_makes_the_edge_and_a_repeat_accept_succeeds(graph: FakeGraph, service: GraphRules) -> None:
    await service.requests.set_privacy(2, True)
    await service.follows.follow(1, 2)
    await service.requests.accept_request(2, 1)
    await service.requests.accept_request(2, 1)  # accepted before: idempotent
    assert (1, 2) in graph.edges
    assert not graph.requests


async def test_accepting_a_request_that_never_existed_is_not_found(service: GraphRules) -> None:
    with pytest.raises(RequestNotFound) as missing:
        await service.requests.accept_request(2, 1)
    assert missing.value.metadata == {"user_id": "2", "requester_id": "1"}


async def test_reject_drops_the_request_and_is_idempotent(graph: FakeGraph, service: GraphRules) -> None:
    await service.requests.set_privacy(2, True)
    await service.follows.follow(1, 2)
    await service.requests.reject_request(2, 1)
    await service.requests.reject_request(2, 1)
    assert not graph.requests
    assert not graph.edges


async def test_turning_private_keeps_followers(graph: FakeGraph, service: GraphRules) -> None:
    await service.follows.follow(1, 2)
    await service.requests.set_privacy(2, True)
    assert (1, 2) in graph.edges
    assert await service.follows.follow(3, 2) is FollowState.REQUESTED


async def test_turning_public_accepts_every_pending_request(graph: FakeGraph, service: GraphRules) -> None:
    await service.requests.set_privacy(2, True)
    askers = list(range(10, 260))  # more than one sweep batch of 100
    for asker in askers:
        await service.follows.follow(asker, 2)
    await service.requests.set_privacy(2, False)
    assert not graph.requests
    assert {a for a, _ in graph.edges} == set(askers)


async def test_a_sweep_overtaken_by_turning_private_again_stops(graph: FakeGraph, service: GraphRules) -> None:
    await service.requests.set_privacy(2, True)
    for asker in range(10, 20):
        await service.follows.follow(asker, 2)

    async def private_again(write: str) -> None:
        if write == "accept":
            graph.private[2] = True  # SetPrivacy(private) lands while the sweep runs

    graph.before_write = private_again
    await service.requests.set_privacy(2, False)
    assert len(graph.requests) == 10  # every accept was conditioned on public: none committed
    assert not graph.edges


# -- blocks ------------------------------------------------------------------------------------


async def test_a_block_removes_follows_and_requests_both_ways(graph: FakeGraph, service: GraphRules) -> None:
    await service.follows.follow(1, 2)
    await service.requests.set_privacy(1, True)
    await service.follows.follow(2, 1)  # a request
    await service.blocks.block(1, 2)
    await service.blocks.block(1, 2)  # idempotent
    assert graph.blocks.keys() == {(1, 2)}
    assert not graph.edges
    assert not graph.requests
    relation = (await service.queries.get_relationships(1, [2]))[0]
    assert relation == (2, Relationship(blocking=True))
    await service.blocks.unblock(1, 2)
    await service.blocks.unblock(1, 2)
    assert not graph.blocks


async def test_a_follow_committed_between_the_block_s_read_and_write_is_removed_too(
    graph: FakeGraph, service: GraphRules
) -> None:
    async def follow_in_between(write: str) -> None:
        if write == "add_block" and (2, 1) not in graph.edges and not graph.blocks:
            graph.edges[(2, 1)] = 100  # refuses this attempt of the block; the next one reads it

    graph.before_write = follow_in_between
    await service.blocks.block(1, 2)
    assert graph.blocks.keys() == {(1, 2)}
    assert not graph.edges


@pytest.mark.parametrize(
    "call", ["blocks.block", "blocks.unblock", "requests.accept_request", "requests.reject_request"]
)
async def test_a_relation_with_oneself_is_refused(service: GraphRules, call: str) -> None:
    capability, method = call.split(".")
    with pytest.raises(SelfRelation):
        await getattr(getattr(service, capability), method)(4, 4)


# -- reads and paging --------------------------------------------------------------------------


async def test_lists_page_newest_first_with_tokens_bound_to_the_query(graph: FakeGraph, service: GraphRules) -> None:
    for fan, at in zip(range(10, 15), (5, 3, 4, 1, 2), strict=True):
        graph.edges[(fan, 2)] = at
    first = await service.queries.list_edges(Direction.FOLLOWERS, 2, 2, "")
    assert first.entries == [Edge(10, 5), Edge(12, 4)]
    second = await service.queries.list_edges(Direction.FOLLOWERS, 2, 2, first.next_page_token)
    assert second.entries == [Edge(11, 3), Edge(14, 2)]
    last = await service.queries.list_edges(Direction.FOLLOWERS, 2, 2, second.next_page_token)
    assert (last.entries, last.next_page_token) == ([Edge(13, 1)], "")
    with pytest.raises(InvalidPageToken):
        await service.queries.list_edges(Direction.FOLLOWING, 2, 2, first.next_page_token)  # another query's token
    with pytest.raises(InvalidPageToken):
        await service.queries.list_edges(Direction.FOLLOWERS, 3, 2, first.next_page_token)  # another user's


async def test_page_sizes_default_clamp_and_refuse_negatives(graph: FakeGraph) -> None:
    service = make_service(graph, replace(SETTINGS, default_page_size=2, max_page_size=3))
    for fan in range(10, 15):
        graph.edges[(fan, 2)] = fan
    assert len((await service.queries.list_edges(Direction.FOLLOWERS, 2, 0, "")).entries) == 2
    assert len((await service.queries.list_edges(Direction.FOLLOWERS, 2, 100, "")).entries) == 3
    with pytest.raises(InvalidPageSize):
        await service.queries.list_edges(Direction.FOLLOWERS, 2, -1, "")


async def test_counts_read_the_counters_and_batches_are_bounded(graph: FakeGraph, service: GraphRules) -> None:
    graph.set_counts(2, Counts(followers=7, following=1, version=3))
    assert await service.queries.get_counts(2) == Counts(7, 1, 3)
    rows = await service.queries.batch_get_counts([2, 3, 2])
    assert [(u, c.followers) for u, c in rows] == [(2, 7), (3, 0), (2, 7)]
    assert await service.queries.batch_get_counts([]) == []
    with pytest.raises(BatchTooLarge):
        await service.queries.batch_get_counts(list(range(1, 102)))
    with pytest.raises(InvalidUserId) as refused:
        await service.queries.batch_get_counts([1, 0])
    assert refused.value.metadata == {"field": "user_ids[1]"}


async def test_relationships_answer_every_target_in_order(graph: FakeGraph, service: GraphRules) -> None:
    await service.follows.follow(1, 2)
    await service.follows.follow(3, 1)
    rows = await service.queries.get_relationships(1, [3, 2, 1, 2])
    assert rows == [
        (3, Relationship(followed_by=True)),
        (2, Relationship(following=True)),
        (1, Relationship()),
        (2, Relationship(following=True)),
    ]
    with pytest.raises(InvalidUserId) as refused:
        await service.queries.get_relationships(1, [2, 0])
    assert refused.value.metadata == {"field": "target_ids[1]"}


@pytest.mark.parametrize("limit", [-1, 101])
async def test_suggestion_limits_outside_0_to_100_are_refused(service: GraphRules, limit: int) -> None:
    with pytest.raises(InvalidLimit):
        await service.suggestions.suggest_follows(1, limit)


async def test_every_refusal_is_a_domain_error_and_writes_nothing(graph: FakeGraph, service: GraphRules) -> None:
    calls = [
        service.follows.follow(0, 1),
        service.follows.unfollow(1, 0),
        service.blocks.block(1, 1),
        service.requests.set_privacy(0, True),
        service.queries.list_edges(Direction.FOLLOWERS, 1, 0, "not-a-token"),
    ]
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    assert all(isinstance(o, DomainError) for o in outcomes)
    assert graph.writes == 0
    assert not graph.private


# -- what the caches are told ------------------------------------------------------------------


async def test_every_acknowledged_write_settles_its_pair_even_when_it_changed_nothing(
    graph: FakeGraph, service: GraphRules, changes: RecordingChanges
) -> None:
    """The caches hear of every write between two accounts: a repeat, a no-op unfollow, a reject of
    nothing and a block already in place each settle the pair (and so drop whatever is cached of it)."""
    writes = [
        (service.follows.follow, (1, 2), ("follow", 1, 2)),
        (service.follows.follow, (1, 2), ("follow", 1, 2)),
        (service.follows.unfollow, (3, 4), ("unfollow", 3, 4)),
        (service.requests.reject_request, (5, 6), ("pair", 6, 5)),
        (service.blocks.block, (7, 8), ("pair", 7, 8)),
        (service.blocks.block, (7, 8), ("pair", 7, 8)),
        (service.blocks.unblock, (9, 10), ("pair", 9, 10)),
        (service.requests.set_privacy, (11, True), ("settings", 11, 11)),
    ]
    for call, arguments, notice in writes:
        changes.notices.clear()
        await call(*arguments)  # type: ignore[operator]  # rules of different signatures in one list
        assert changes.notices == [notice], call.__name__


async def test_a_block_settles_each_follow_it_removed(
    graph: FakeGraph, service: GraphRules, changes: RecordingChanges
) -> None:
    await service.follows.follow(1, 2)
    await service.follows.follow(2, 1)
    changes.notices.clear()
    await service.blocks.block(1, 2)
    assert changes.notices == [("unfollow", 1, 2), ("unfollow", 2, 1), ("pair", 1, 2)]


async def test_refused_calls_settle_nothing(service: GraphRules, changes: RecordingChanges) -> None:
    await service.blocks.block(2, 1)
    changes.notices.clear()
    for call in (service.follows.follow(1, 2), service.follows.follow(0, 2), service.requests.accept_request(2, 1)):
        with pytest.raises(DomainError):
            await call
    assert changes.notices == []
