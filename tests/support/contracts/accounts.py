"""What every ``AccountStore`` must do (SPEC §3b): the states, their generations, and the settling of
an edge or request made with an account just as it left the graph.

``AccountContract`` is run against the in-memory fake (``tests/unit/fakes``) and ``DynamoAccounts``
on DynamoDB Local (``tests/integration/store``): a subclass provides the ``store`` fixture, the
accounts with the graph store they settle edges in. Every test takes fresh user IDs from
``users``, so implementations may share tables between tests.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest

from graph_service.domain.account_ports import AccountStore
from graph_service.domain.accounts import AccountStatus, Lifecycle, Side
from graph_service.domain.models import Edge, Made
from graph_service.domain.ports import GraphWrites

__all__ = ["AccountContract", "AccountsUnderTest", "Held", "Users"]

Users = Callable[[int], list[int]]
Held = set[tuple[Side, int, int]]
"""(side, other, at) of each item archived in an account's partition."""
T = 4_000_000_000_000_000  # µs: the year 2096


@dataclass
class AccountsUnderTest:
    accounts: AccountStore
    graph: GraphWrites
    """The graph's writes, where the edges and requests ``settle_late`` moves are made."""
    archived: Callable[[int], Awaitable[Held]]
    """What is archived in the account's partition."""
    finish: Callable[[int], Awaitable[None]]
    """The account's job ends: its state becomes the settled one (``DEACTIVATED``, ``ACTIVE``,
    ``DELETED``), at the same generation, as a job's last write leaves it."""


async def move(store: AccountsUnderTest, user_id: int, *states: Lifecycle, at_us: int = T) -> AccountStatus:
    """Change the account to each of ``states`` in turn (each a call's change); its status after."""
    for to in states:
        assert await store.accounts.change(await store.accounts.status(user_id), to, at_us)
    return await store.accounts.status(user_id)


async def make(store: AccountsUnderTest, side: Side, user_id: int, other: int, at_us: int, *, cap: int = 0) -> Made:
    """The edge or request that touches ``user_id`` as ``side`` says, made by the graph's writes."""
    follower, followee = side.follower_followee(user_id, other)
    add = store.graph.add_edge if side.is_edge else store.graph.add_request
    return await add(follower, followee, at_us, cap=cap)


async def held_at(store: AccountsUnderTest, side: Side, user_id: int, other: int) -> int | None:
    """When the live edge or request of the side was made (None: not in the graph)."""
    follower, followee = side.follower_followee(user_id, other)
    if side.is_edge:
        return await store.graph.edge_at(follower, followee)
    return await store.graph.request_at(followee, follower)


SIDES = pytest.mark.parametrize("side", list(Side), ids=[s.name.lower() for s in Side])


class AccountContract:
    @pytest.fixture
    def users(self) -> Users:
        """``users(n)``: n user IDs no other test of the session uses."""
        ids = itertools.count(random.randrange(1, 2**40) * 1000)
        return lambda n: [next(ids) for _ in range(n)]

    # -- states and generations -----------------------------------------------------------

    async def test_an_account_never_changed_is_active_at_generation_zero(
        self, store: AccountsUnderTest, users: Users
    ) -> None:
        (u,) = users(1)
        assert await store.accounts.status(u) == AccountStatus(u, Lifecycle.ACTIVE, 0, 0, 0, 0, Lifecycle.ACTIVE)
        assert await store.accounts.states([u]) == {u: Lifecycle.ACTIVE}

    async def test_a_change_moves_to_the_next_generation_and_remembers_where_it_came_from(
        self, store: AccountsUnderTest, users: Users
    ) -> None:
        (u,) = users(1)
        assert await store.accounts.change(await store.accounts.status(u), Lifecycle.DEACTIVATING, T, total=3)
        first = await store.accounts.status(u)
        assert first == AccountStatus(u, Lifecycle.DEACTIVATING, 1, 0, 3, T, Lifecycle.ACTIVE)
        assert await store.accounts.change(first, Lifecycle.REACTIVATING, T + 5)
        assert await store.accounts.status(u) == AccountStatus(
            u, Lifecycle.REACTIVATING, 2, 0, 0, T + 5, Lifecycle.DEACTIVATING
        )
        assert await store.accounts.states([u]) == {u: Lifecycle.REACTIVATING}

    async def test_a_change_from_a_stale_status_is_refused_and_writes_nothing(
        self, store: AccountsUnderTest, users: Users
    ) -> None:
        a, b = users(2)
        never = await store.accounts.status(a)
        assert await store.accounts.change(never, Lifecycle.DEACTIVATING, T)
        moved = await store.accounts.status(a)
        assert not await store.accounts.change(never, Lifecycle.DELETING, T + 1)  # generation 0: gone
        assert not await store.accounts.change(AccountStatus(a, Lifecycle.DEACTIVATING, 7), Lifecycle.DELETING, T + 1)
        assert await store.accounts.status(a) == moved
        # An account never changed refuses a status that claims a generation it never had.
        assert not await store.accounts.change(AccountStatus(b, Lifecycle.ACTIVE, 1), Lifecycle.DELETING, T)
        assert await store.accounts.status(b) == AccountStatus(b)

    async def test_of_two_changes_from_the_same_status_one_commits(
        self, store: AccountsUnderTest, users: Users
    ) -> None:
        (u,) = users(1)
        current = await store.accounts.status(u)
        made = await asyncio.gather(
            store.accounts.change(current, Lifecycle.DEACTIVATING, T),
            store.accounts.change(current, Lifecycle.DELETING, T + 1),
        )
        assert sorted(made) == [False, True]
        status = await store.accounts.status(u)
        assert status.gen == 1
        assert status.state is (Lifecycle.DEACTIVATING if made[0] else Lifecycle.DELETING)

    async def test_the_states_of_many_accounts_at_once(self, store: AccountsUnderTest, users: Users) -> None:
        never, away, gone, back, done, *others = users(130)  # more than one batch of reads
        await move(store, away, Lifecycle.DEACTIVATING)
        await move(store, gone, Lifecycle.DELETING)
        await move(store, back, Lifecycle.DEACTIVATING, Lifecycle.REACTIVATING)
        await move(store, done, Lifecycle.DEACTIVATING)
        await store.finish(done)
        found = await store.accounts.states([never, away, gone, back, done, never, *others])
        assert found == {
            never: Lifecycle.ACTIVE,
            away: Lifecycle.DEACTIVATING,
            gone: Lifecycle.DELETING,
            back: Lifecycle.REACTIVATING,
            done: Lifecycle.DEACTIVATED,
            **{u: Lifecycle.ACTIVE for u in others},
        }
        assert await store.accounts.states([]) == {}

    async def test_a_finished_job_settles_the_state_at_the_same_generation(
        self, store: AccountsUnderTest, users: Users
    ) -> None:
        away, back, gone = users(3)
        for user, states, settled in (
            (away, [Lifecycle.DEACTIVATING], Lifecycle.DEACTIVATED),
            (back, [Lifecycle.DEACTIVATING, Lifecycle.REACTIVATING], Lifecycle.ACTIVE),
            (gone, [Lifecycle.DELETING], Lifecycle.DELETED),
        ):
            before = await move(store, user, *states)
            await store.finish(user)
            after = await store.accounts.status(user)
            assert (after.state, after.gen) == (settled, before.gen)

    # -- settle_late ------------------------------------------------------------------------

    @SIDES
    async def test_an_item_made_with_an_account_leaving_is_archived_in_its_partition(
        self, store: AccountsUnderTest, users: Users, side: Side
    ) -> None:
        u, other = users(2)
        await move(store, u, Lifecycle.DEACTIVATING)
        assert await make(store, side, u, other, T) is Made.CREATED  # the graph's writes read no state
        await store.accounts.settle_late(u, side, Edge(other, T))
        assert await held_at(store, side, u, other) is None
        assert await store.archived(u) == {(side, other, T)}
        assert await store.archived(other) == set()

    @SIDES
    async def test_an_item_made_after_the_job_finished_is_archived_too(
        self, store: AccountsUnderTest, users: Users, side: Side
    ) -> None:
        u, other = users(2)
        await move(store, u, Lifecycle.DEACTIVATING)
        await store.finish(u)
        await make(store, side, u, other, T)
        await store.accounts.settle_late(u, side, Edge(other, T))
        assert await held_at(store, side, u, other) is None
        assert await store.archived(u) == {(side, other, T)}

    @SIDES
    @pytest.mark.parametrize("finished", [False, True], ids=["deleting", "deleted"])
    async def test_an_item_made_with_an_account_being_deleted_is_removed(
        self, store: AccountsUnderTest, users: Users, side: Side, finished: bool
    ) -> None:
        u, other = users(2)
        await move(store, u, Lifecycle.DELETING)
        if finished:
            await store.finish(u)
        await make(store, side, u, other, T)
        await store.accounts.settle_late(u, side, Edge(other, T))
        assert await held_at(store, side, u, other) is None
        assert await store.archived(u) == set()
        assert await store.archived(other) == set()

    @SIDES
    @pytest.mark.parametrize(
        "states",
        [[], [Lifecycle.DEACTIVATING, Lifecycle.REACTIVATING], [Lifecycle.DEACTIVATING, Lifecycle.REACTIVATING, None]],
        ids=["never-left", "reactivating", "reactivated"],
    )
    async def test_an_item_made_with_an_account_in_the_graph_stays(
        self, store: AccountsUnderTest, users: Users, side: Side, states: list[Lifecycle | None]
    ) -> None:
        """None in ``states``: the job of the last change finishes."""
        u, other = users(2)
        for to in states:
            if to is None:
                await store.finish(u)
            else:
                await move(store, u, to)
        await make(store, side, u, other, T)
        await store.accounts.settle_late(u, side, Edge(other, T))
        assert await held_at(store, side, u, other) == T
        assert await store.archived(u) == set()

    @SIDES
    async def test_an_item_gone_or_made_again_meanwhile_is_left_alone(
        self, store: AccountsUnderTest, users: Users, side: Side
    ) -> None:
        """The job (or an unfollow) got there first; a newer item of the pair is not the one made."""
        u, gone, remade = users(3)
        await move(store, u, Lifecycle.DEACTIVATING)
        await store.accounts.settle_late(u, side, Edge(gone, T))  # never made, or removed already
        await make(store, side, u, remade, T + 1)
        await store.accounts.settle_late(u, side, Edge(remade, T))  # the one made at T was removed
        assert await held_at(store, side, u, gone) is None
        assert await held_at(store, side, u, remade) == T + 1
        assert await store.archived(u) == set()

    @SIDES
    async def test_settling_again_changes_nothing(self, store: AccountsUnderTest, users: Users, side: Side) -> None:
        u, other = users(2)
        await move(store, u, Lifecycle.DEACTIVATING)
        await make(store, side, u, other, T)
        for _ in range(2):
            await store.accounts.settle_late(u, side, Edge(other, T))
        assert await store.archived(u) == {(side, other, T)}
        assert await held_at(store, side, u, other) is None

    @pytest.mark.parametrize(
        ("side", "leaving"),
        [(side, Lifecycle.DEACTIVATING) for side in Side]
        + [(side, Lifecycle.DELETING) for side in (Side.FOLLOWER, Side.REQUESTER)],
        ids=[f"archived-{side.name.lower()}" for side in Side] + ["deleted-follower", "deleted-requester"],
    )
    async def test_a_settled_item_no_longer_counts_against_the_followers_cap(
        self, store: AccountsUnderTest, users: Users, side: Side, leaving: Lifecycle
    ) -> None:
        """Archived or deleted, it is no follow or pending request of its follower any more (a deleted
        account's own count is not moved: its job deletes it whole, and it follows no one again)."""
        u, other, third = users(3)
        follower, _ = side.follower_followee(u, other)
        await move(store, u, leaving)
        assert await make(store, side, u, other, T, cap=1) is Made.CREATED
        assert await store.graph.add_edge(follower, third, T + 1, cap=1) is Made.AT_CAP
        await store.accounts.settle_late(u, side, Edge(other, T))
        assert await store.graph.add_edge(follower, third, T + 2, cap=1) is Made.CREATED

    async def test_each_account_keeps_its_own_archive(self, store: AccountsUnderTest, users: Users) -> None:
        """Two accounts away at once: an edge between them is archived by whichever settles it."""
        a, b, c = users(3)
        await move(store, a, Lifecycle.DEACTIVATING)
        await move(store, b, Lifecycle.DEACTIVATING)
        await store.graph.add_edge(a, b, T)
        await store.graph.add_request(c, a, T + 1)
        await store.accounts.settle_late(b, Side.FOLLOWER, Edge(a, T))
        await store.accounts.settle_late(a, Side.FOLLOWING, Edge(b, T))  # the other side: gone already
        await store.accounts.settle_late(a, Side.REQUESTER, Edge(c, T + 1))
        assert await store.archived(b) == {(Side.FOLLOWER, a, T)}
        assert await store.archived(a) == {(Side.REQUESTER, c, T + 1)}
        assert await store.archived(c) == set()
