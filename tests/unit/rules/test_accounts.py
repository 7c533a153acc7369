"""DeactivateAccount, ReactivateAccount, DeleteAccount and what they change at once for every other
rule (SPEC §3b), on the in-memory graph and account states (no job runs: the edges stay stored)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace

import pytest

from graph_service.domain.accounts import AccountStatus, Lifecycle, Side
from graph_service.domain.errors import (
    AccountDeactivated,
    AccountDeleted,
    DomainError,
    InvalidPageToken,
    InvalidUserId,
    Unavailable,
)
from graph_service.domain.models import Counts, Direction, FollowState, Relationship
from graph_service.rules.graph import GraphRules
from graph_service.rules.limits import RuleLimits
from graph_service.rules.races import RACE_ATTEMPTS
from tests.support.fakes.accounts import FakeAccounts
from tests.support.fakes.changes import RecordingChanges
from tests.support.fakes.graph import FakeGraph
from tests.support.rules import rules_on

LIMITS = RuleLimits(page_token_secrets=("unit-test-secret",))
U = 1
"""The account that leaves the graph in these tests."""


@pytest.fixture
def graph() -> FakeGraph:
    return FakeGraph()


@pytest.fixture
def accounts(graph: FakeGraph) -> FakeAccounts:
    return FakeAccounts(graph)


@pytest.fixture
def changes() -> RecordingChanges:
    return RecordingChanges()


@pytest.fixture
def rules(graph: FakeGraph, accounts: FakeAccounts, changes: RecordingChanges) -> GraphRules:
    return rules_on(graph, LIMITS, changes=changes, accounts=accounts)


async def state_of(accounts: FakeAccounts, user_id: int) -> tuple[Lifecycle, int]:
    status = await accounts.status(user_id)
    return status.state, status.gen


def finish(accounts: FakeAccounts, user_id: int) -> None:
    """The account's job ends (its state settles) without moving anything."""
    status = accounts.stored[user_id]
    accounts.stored[user_id] = replace(status, state=status.state.settled)


AWAY = pytest.mark.parametrize("how", ["deactivate", "delete"], ids=["deactivated", "deleted"])
"""How the account leaves the graph: the reads answer the same either way."""
REFUSED = pytest.mark.parametrize(
    ("how", "refused"),
    [("deactivate", AccountDeactivated), ("delete", AccountDeleted)],
    ids=["deactivated", "deleted"],
)


async def leave(rules: GraphRules, how: str) -> None:
    await (rules.accounts.deactivate if how == "deactivate" else rules.accounts.delete)(U)


# -- the transitions ---------------------------------------------------------------------------


async def test_deactivate_then_reactivate_each_move_once_and_repeats_change_nothing(
    rules: GraphRules, accounts: FakeAccounts
) -> None:
    await rules.accounts.reactivate(U)  # never deactivated: in the graph already
    assert U not in accounts.stored
    await rules.accounts.deactivate(U)
    await rules.accounts.deactivate(U)
    assert await state_of(accounts, U) == (Lifecycle.DEACTIVATING, 1)
    finish(accounts, U)
    await rules.accounts.deactivate(U)  # its job done: still away
    assert await state_of(accounts, U) == (Lifecycle.DEACTIVATED, 1)
    await rules.accounts.reactivate(U)
    await rules.accounts.reactivate(U)
    status = await rules.accounts.status(U)
    assert (status.state, status.gen, status.previous) == (Lifecycle.REACTIVATING, 2, Lifecycle.DEACTIVATED)
    finish(accounts, U)
    await rules.accounts.reactivate(U)
    assert await state_of(accounts, U) == (Lifecycle.ACTIVE, 2)


async def test_the_later_call_wins_while_a_job_runs(rules: GraphRules, accounts: FakeAccounts) -> None:
    await rules.accounts.deactivate(U)
    await rules.accounts.reactivate(U)  # while the deactivation's job runs
    assert await state_of(accounts, U) == (Lifecycle.REACTIVATING, 2)
    await rules.accounts.deactivate(U)  # while the restore runs
    assert await state_of(accounts, U) == (Lifecycle.DEACTIVATING, 3)


@pytest.mark.parametrize(
    "before", [[], ["deactivate"], ["deactivate", "finish"]], ids=["active", "deactivating", "deactivated"]
)
async def test_delete_is_irreversible_and_idempotent(
    rules: GraphRules, accounts: FakeAccounts, before: list[str]
) -> None:
    for step in before:
        if step == "finish":
            finish(accounts, U)
        else:
            await rules.accounts.deactivate(U)
    await rules.accounts.delete(U)
    gen = len([s for s in before if s != "finish"]) + 1
    assert await state_of(accounts, U) == (Lifecycle.DELETING, gen)
    await rules.accounts.delete(U)
    assert await state_of(accounts, U) == (Lifecycle.DELETING, gen)
    finish(accounts, U)
    await rules.accounts.delete(U)
    assert await state_of(accounts, U) == (Lifecycle.DELETED, gen)


@pytest.mark.parametrize("settled", [False, True], ids=["deleting", "deleted"])
@pytest.mark.parametrize("call", ["reactivate", "deactivate"])
async def test_a_deleted_account_cannot_be_reactivated_or_deactivated(
    rules: GraphRules, accounts: FakeAccounts, call: str, settled: bool
) -> None:
    await rules.accounts.delete(U)
    if settled:
        finish(accounts, U)
    before = await accounts.status(U)
    with pytest.raises(AccountDeleted) as refused:
        await getattr(rules.accounts, call)(U)
    assert refused.value.reason == "ACCOUNT_DELETED"
    assert refused.value.metadata == {"user_id": str(U)}
    assert await accounts.status(U) == before


@pytest.mark.parametrize("call", ["deactivate", "reactivate", "delete", "status"])
async def test_an_id_of_0_is_refused_before_anything_is_read_or_written(
    rules: GraphRules, accounts: FakeAccounts, changes: RecordingChanges, call: str
) -> None:
    with pytest.raises(InvalidUserId) as refused:
        await getattr(rules.accounts, call)(0)
    assert refused.value.metadata == {"field": "user_id"}
    assert accounts.stored == {}
    assert changes.notices == []


async def test_every_change_and_every_repeat_settles_the_users_settings(
    rules: GraphRules, changes: RecordingChanges
) -> None:
    """The caches drop the account's state before the call returns, also after a repeat (a first
    call that failed after its write may not have settled it)."""
    for call in ("reactivate", "deactivate", "deactivate", "reactivate", "reactivate", "delete", "delete"):
        await getattr(rules.accounts, call)(U)
    assert changes.notices == [("settings", U, U)] * 7


async def test_the_status_says_the_state_generation_and_progress(rules: GraphRules, accounts: FakeAccounts) -> None:
    assert await rules.accounts.status(U) == AccountStatus(U)
    await rules.accounts.deactivate(U)
    accounts.stored[U] = replace(accounts.stored[U], edges_done=3, edges_total=10)
    status = await rules.accounts.status(U)
    assert (status.state, status.gen, status.edges_done, status.edges_total) == (Lifecycle.DEACTIVATING, 1, 3, 10)
    assert status.at_us > 0


async def test_a_change_that_loses_a_race_decides_again_from_the_new_state(
    rules: GraphRules, accounts: FakeAccounts
) -> None:
    """A reactivation read "deactivating", and a deletion committed before its write: it reads
    again and finds the account deleted."""
    await rules.accounts.deactivate(U)
    original = accounts.change

    async def deleted_first(current: AccountStatus, to: Lifecycle, at_us: int, *, total: int = 0) -> bool:
        accounts.change = original  # type: ignore[method-assign]  # the racer runs once
        assert await original(current, Lifecycle.DELETING, at_us)
        return await original(current, to, at_us, total=total)

    accounts.change = deleted_first  # type: ignore[method-assign]  # the race, in place
    with pytest.raises(AccountDeleted):
        await rules.accounts.reactivate(U)
    assert await state_of(accounts, U) == (Lifecycle.DELETING, 2)


async def test_a_state_that_keeps_changing_is_unavailable(rules: GraphRules, accounts: FakeAccounts) -> None:
    tries = 0

    async def always_moved(current: AccountStatus, to: Lifecycle, at_us: int, *, total: int = 0) -> bool:
        nonlocal tries
        tries += 1
        return False

    accounts.change = always_moved  # type: ignore[method-assign]
    with pytest.raises(Unavailable):
        await rules.accounts.deactivate(U)
    assert tries == RACE_ATTEMPTS


# -- the immediate effects on the reads --------------------------------------------------------


def build_world(graph: FakeGraph) -> None:
    """U follows 2 and 4, and 2 and 3 follow U; 5 asked to follow U, U asked to follow 6; U blocks 7
    and 8 blocks U. Between others: 4 and 3 follow 2, 2 follows 3 (known followers of U and 2), and
    10 follows 3 (U and 2 are suggested to 10)."""
    graph.edges.update(
        {(U, 2): 101, (2, U): 102, (3, U): 103, (U, 4): 104, (4, 2): 105, (2, 3): 106, (10, 3): 107, (3, 2): 108}
    )
    graph.requests.update({(5, U): 201, (U, 6): 202})
    graph.blocks.update({(U, 7): 301, (8, U): 302})
    graph.settle_counts()


async def test_everything_about_the_account_shows_before_it_leaves(rules: GraphRules, graph: FakeGraph) -> None:
    """The world of these tests as the reads see it while the account is in the graph."""
    build_world(graph)
    assert await rules.queries.is_following(U, 2)
    assert await rules.queries.is_following(3, U)
    assert [e.user_id for e in (await rules.queries.list_edges(Direction.FOLLOWERS, U, 0, "")).entries] == [3, 2]
    assert await rules.queries.get_counts(U) == graph.counts[U] != Counts()
    assert [e.user_id for e in (await rules.requests.list_requests(U, 0, "")).entries] == [5]
    assert [e.user_id for e in (await rules.known.list_known_followers(U, 2, 0, "")).entries] == [4]
    assert [e.user_id for e in (await rules.known.list_known_followers(2, U, 0, "")).entries] == [3]
    assert [e.user_id for e in (await rules.known.list_mutual_follows(U, 0, "")).entries] == [2]
    assert U in [s.user_id for s in await rules.suggestions.suggest_follows(10, 0)]


@AWAY
async def test_no_follow_to_or_from_an_account_away_is_seen(rules: GraphRules, graph: FakeGraph, how: str) -> None:
    build_world(graph)
    stored = dict(graph.edges)
    await leave(rules, how)
    for follower, followee in ((U, 2), (2, U), (3, U), (U, 4)):
        assert not await rules.queries.is_following(follower, followee)
    assert await rules.queries.is_following(4, 2)  # between others: as it was
    assert graph.edges == stored  # no job has run: everything is still stored


@AWAY
async def test_the_accounts_own_lists_are_empty_and_still_check_their_tokens(
    rules: GraphRules, graph: FakeGraph, how: str
) -> None:
    build_world(graph)
    earlier = await rules.queries.list_edges(Direction.FOLLOWERS, U, 1, "")
    assert earlier.next_page_token
    await leave(rules, how)
    for direction in Direction:
        page = await rules.queries.list_edges(direction, U, 0, "")
        assert (list(page.entries), page.next_page_token) == ([], "")
        with pytest.raises(InvalidPageToken):
            await rules.queries.list_edges(direction, U, 0, "not-a-token")
    later = await rules.queries.list_edges(Direction.FOLLOWERS, U, 1, earlier.next_page_token)
    assert (list(later.entries), later.next_page_token) == ([], "")
    requests = await rules.requests.list_requests(U, 0, "")
    assert (list(requests.entries), requests.next_page_token) == ([], "")
    with pytest.raises(InvalidPageToken):
        await rules.requests.list_requests(U, 0, "not-a-token")


@AWAY
async def test_the_accounts_counts_are_zero_and_the_others_as_stored(
    rules: GraphRules, graph: FakeGraph, how: str
) -> None:
    build_world(graph)
    await leave(rules, how)
    assert await rules.queries.get_counts(U) == Counts()
    assert await rules.queries.batch_get_counts([2, U, 3, U]) == [
        (2, graph.counts[2]),
        (U, Counts()),
        (3, graph.counts[3]),
        (U, Counts()),
    ]


@AWAY
async def test_relationships_keep_blocks_and_mutes_but_no_follow_or_request(
    rules: GraphRules, graph: FakeGraph, how: str
) -> None:
    build_world(graph)
    await rules.mutes.mute(U, 2, 0, True)
    await rules.mutes.mute(2, U, 0, False)
    await leave(rules, how)
    mine = dict(await rules.queries.get_relationships(U, [2, 3, 4, 5, 6, 7, 8]))
    assert mine == {
        2: Relationship(mute_expires_us=0, muting_notifications=True),
        3: Relationship(),
        4: Relationship(),
        5: Relationship(),
        6: Relationship(),
        7: Relationship(blocking=True),
        8: Relationship(blocked_by=True),
    }
    assert dict(await rules.queries.get_relationships(2, [U, 3])) == {
        U: Relationship(mute_expires_us=0),
        3: Relationship(following=True, followed_by=True),  # between others: as it was
    }
    for other, blocks in ((3, {}), (5, {}), (6, {}), (7, {"blocked_by": True}), (8, {"blocking": True})):
        assert dict(await rules.queries.get_relationships(other, [U])) == {U: Relationship(**blocks)}


@AWAY
async def test_known_followers_and_mutuals_of_or_for_the_account_are_empty(
    rules: GraphRules, graph: FakeGraph, how: str
) -> None:
    build_world(graph)
    await leave(rules, how)
    for page in (
        await rules.known.list_known_followers(U, 2, 0, ""),
        await rules.known.list_known_followers(2, U, 0, ""),
        await rules.known.list_mutual_follows(U, 0, ""),
    ):
        assert (list(page.entries), page.next_page_token) == ([], "")
    with pytest.raises(InvalidPageToken):
        await rules.known.list_mutual_follows(U, 0, "not-a-token")


@AWAY
async def test_the_account_is_never_suggested_and_gets_no_suggestions(
    rules: GraphRules, graph: FakeGraph, how: str
) -> None:
    build_world(graph)
    before = [s.user_id for s in await rules.suggestions.suggest_follows(10, 0)]
    await leave(rules, how)
    assert [s.user_id for s in await rules.suggestions.suggest_follows(10, 0)] == [u for u in before if u != U]
    assert await rules.suggestions.suggest_follows(U, 0) == []


@REFUSED
@pytest.mark.parametrize("private", [False, True], ids=["public", "private"])
async def test_a_follow_to_or_from_the_account_is_refused_and_writes_nothing(
    rules: GraphRules, graph: FakeGraph, how: str, refused: type[DomainError], private: bool
) -> None:
    graph.private.update({U: private, 2: private})
    await leave(rules, how)
    for follower, followee in ((U, 2), (2, U)):
        with pytest.raises(refused) as error:
            await rules.follows.follow(follower, followee)
        assert error.value.metadata == {"user_id": str(U)}
    assert (graph.edges, graph.requests, graph.writes) == ({}, {}, 0)


@REFUSED
async def test_an_accept_of_a_request_from_or_to_the_account_is_refused(
    rules: GraphRules, graph: FakeGraph, how: str, refused: type[DomainError]
) -> None:
    graph.requests.update({(U, 2): 201, (3, U): 202})
    await leave(rules, how)
    for user, requester in ((2, U), (U, 3)):
        with pytest.raises(refused) as error:
            await rules.requests.accept_request(user, requester)
        assert error.value.metadata == {"user_id": str(U)}
    assert graph.requests == {(U, 2): 201, (3, U): 202}  # left for the job
    assert graph.edges == {}


async def test_a_reactivation_shows_the_stored_edges_again(
    rules: GraphRules, graph: FakeGraph, accounts: FakeAccounts
) -> None:
    """No job archived anything: once back, everything reads as before."""
    build_world(graph)

    async def seen() -> list[object]:
        return [
            await rules.queries.is_following(U, 2),
            await rules.queries.is_following(3, U),
            list((await rules.queries.list_edges(Direction.FOLLOWERS, U, 0, "")).entries),
            list((await rules.queries.list_edges(Direction.FOLLOWING, U, 0, "")).entries),
            await rules.queries.get_counts(U),
            await rules.queries.get_relationships(U, [2, 5, 6, 7]),
            list((await rules.requests.list_requests(U, 0, "")).entries),
            list((await rules.known.list_mutual_follows(U, 0, "")).entries),
            await rules.suggestions.suggest_follows(10, 0),
        ]

    before = await seen()
    await rules.accounts.deactivate(U)
    assert await seen() != before
    await rules.accounts.reactivate(U)
    assert await state_of(accounts, U) == (Lifecycle.REACTIVATING, 2)
    assert await seen() == before
    assert await rules.follows.follow(U, 3) is FollowState.FOLLOWING  # following again too


# -- a follow that races the account leaving ---------------------------------------------------


def during(graph: FakeGraph, write: str, act: Callable[[], Awaitable[None]]) -> None:
    """``act`` runs once, just before the first write named ``write`` decides: after the rule read
    the states, before its write commits."""

    async def hook(name: str) -> None:
        if name == write:
            graph.before_write = None
            await act()

    graph.before_write = hook


@pytest.mark.parametrize(
    ("leaving", "side"), [(2, Side.FOLLOWER), (U, Side.FOLLOWING)], ids=["followee-leaves", "follower-leaves"]
)
async def test_a_follow_committed_just_after_a_deactivation_ends_archived(
    rules: GraphRules, graph: FakeGraph, accounts: FakeAccounts, leaving: int, side: Side
) -> None:
    during(graph, "add_edge", lambda: rules.accounts.deactivate(leaving))
    assert await rules.follows.follow(U, 2) is FollowState.FOLLOWING  # it happened before, as far as anyone can tell
    assert graph.edges == {}
    ((archived_side, other, at),) = accounts.archived[leaving]
    assert (archived_side, other) == (side, 2 if leaving == U else U)
    assert at > 0
    assert set(accounts.archived) == {leaving}
    assert not await rules.queries.is_following(U, 2)


async def test_a_request_committed_just_after_a_deactivation_ends_archived(
    rules: GraphRules, graph: FakeGraph, accounts: FakeAccounts
) -> None:
    graph.private[2] = True
    during(graph, "add_request", lambda: rules.accounts.deactivate(2))
    assert await rules.follows.follow(U, 2) is FollowState.REQUESTED
    assert graph.requests == {}
    assert [(s, o) for s, o, _ in accounts.archived[2]] == [(Side.REQUESTER, U)]


async def test_a_follow_committed_just_after_a_deletion_is_removed(
    rules: GraphRules, graph: FakeGraph, accounts: FakeAccounts
) -> None:
    during(graph, "add_edge", lambda: rules.accounts.delete(2))
    await rules.follows.follow(U, 2)
    assert graph.edges == {}
    assert accounts.archived == {}


async def test_an_accept_committed_just_after_the_requester_left_ends_archived(
    rules: GraphRules, graph: FakeGraph, accounts: FakeAccounts
) -> None:
    graph.requests[(3, U)] = 201
    during(graph, "accept", lambda: rules.accounts.deactivate(3))
    await rules.requests.accept_request(U, 3)
    assert (graph.edges, graph.requests) == ({}, {})
    assert [(s, o) for s, o, _ in accounts.archived[3]] == [(Side.FOLLOWING, U)]


async def test_a_follow_committed_just_after_a_deactivation_and_reactivation_stays(
    rules: GraphRules, graph: FakeGraph, accounts: FakeAccounts
) -> None:
    async def away_and_back() -> None:
        await rules.accounts.deactivate(2)
        await rules.accounts.reactivate(2)

    during(graph, "add_edge", away_and_back)
    await rules.follows.follow(U, 2)
    assert set(graph.edges) == {(U, 2)}
    assert accounts.archived == {}
    assert await rules.queries.is_following(U, 2)


async def test_turning_public_accepts_a_request_from_an_account_away_and_the_follow_leaves_with_it(
    rules: GraphRules, graph: FakeGraph, accounts: FakeAccounts
) -> None:
    """The sweep of SetPrivacy(public) reads no state: it accepts the pending request its job has
    not archived yet, and the follow it makes is archived with the requester (back with it)."""
    graph.private[U] = True
    graph.requests[(3, U)] = 201
    await rules.accounts.deactivate(3)
    await rules.requests.set_privacy(U, False)
    assert (graph.edges, graph.requests) == ({}, {})
    assert [(s, o) for s, o, _ in accounts.archived[3]] == [(Side.FOLLOWING, U)]


async def test_an_account_coming_back_follows_and_is_followed_at_once(
    rules: GraphRules, graph: FakeGraph, accounts: FakeAccounts
) -> None:
    """While its restore runs (``REACTIVATING``) the account is in the graph: nothing is settled late."""
    await rules.accounts.deactivate(U)
    await rules.accounts.reactivate(U)
    assert await rules.follows.follow(U, 2) is FollowState.FOLLOWING
    assert await rules.follows.follow(3, U) is FollowState.FOLLOWING
    assert set(graph.edges) == {(U, 2), (3, U)}
    assert accounts.archived == {}
    assert await rules.queries.is_following(U, 2)
