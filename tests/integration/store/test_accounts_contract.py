"""The account states on DynamoDB Local keep the account store contract (which the in-memory fake
keeps too), with the state item and the archived items ``store/account_items.py`` describes."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Sequence

import pytest

from graph_service.domain.accounts import Archived, Lifecycle, Side
from graph_service.domain.models import Edge, Made
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.operations import Item
from graph_service.dynamodb.tables import FOLLOWERS, TableNames
from graph_service.settings import Settings
from graph_service.store.account_store import DynamoAccounts
from graph_service.store.graph_store import DynamoGraphStore
from relay.sources import graph_events
from tests.support.contracts.accounts import AccountContract, AccountsUnderTest, Held, T
from tests.support.table_items import partition_items

LISTED = 1000
"""More archived items than any test makes."""


class Store:
    def __init__(self, settings: Settings) -> None:
        self.dynamo = AsyncDynamo.build(settings)
        self.table = settings.table(FOLLOWERS)
        tables = TableNames(settings.table_prefix)
        self.graph = DynamoGraphStore(self.dynamo, tables)
        self.accounts = DynamoAccounts(self.dynamo, tables)

    async def archived(self, user_id: int) -> Held:
        return {(a.side, a.other, a.at_us) for a in await self.accounts.archived(user_id, None, LISTED)}

    async def finish(self, user_id: int) -> None:
        status = await self.accounts.status(user_id)
        assert await self.accounts.finish(user_id, status.gen, status.state)

    async def partition(self, owner: int) -> dict[str, Item]:
        return await partition_items(self.dynamo, self.table, owner)


@pytest.fixture
async def dynamo_store(shared_tables: Settings) -> AsyncIterator[Store]:
    value = Store(shared_tables)
    try:
        yield value
    finally:
        value.dynamo.close()


class TestDynamoAccounts(AccountContract):
    @pytest.fixture
    def store(self, dynamo_store: Store) -> AccountsUnderTest:
        return AccountsUnderTest(dynamo_store.accounts, dynamo_store.graph, dynamo_store.archived, dynamo_store.finish)


def fresh_users(n: int) -> list[int]:
    """n user IDs no other test uses (the tables are shared by the module)."""
    start = random.randrange(1, 2**40) * 1000
    return list(range(start, start + n))


async def test_a_change_writes_the_state_item_and_registers_its_job(dynamo_store: Store) -> None:
    (u,) = fresh_users(1)
    assert await dynamo_store.accounts.change(await dynamo_store.accounts.status(u), Lifecycle.DEACTIVATING, T, total=4)
    state = (await dynamo_store.partition(u))["A"]
    assert {k: v for k, v in state.items() if k not in {"pk", "sk"}} == {
        "st": {"S": "d"},
        "gen": {"N": "1"},
        "done": {"N": "0"},
        "total": {"N": "4"},
        "at": {"N": str(T)},
        "prev": {"S": "a"},
    }
    jobs = {j.user_id: j for j in await dynamo_store.accounts.jobs()}
    assert (jobs[u].gen, jobs[u].owner, jobs[u].until_ms) == (1, "", 0)


async def test_a_late_edge_is_archived_as_one_item_with_the_generation_that_archived_it(
    dynamo_store: Store,
) -> None:
    u, other = fresh_users(2)
    for to in (Lifecycle.DEACTIVATING, Lifecycle.REACTIVATING, Lifecycle.DEACTIVATING):
        assert await dynamo_store.accounts.change(await dynamo_store.accounts.status(u), to, T)
    await dynamo_store.graph.add_edge(other, u, T)
    await dynamo_store.accounts.settle_late(u, Side.FOLLOWER, Edge(other, T))
    found = await dynamo_store.partition(u)
    assert set(found) == {"A", f"X#F#{other:020d}"}  # the edge's E# and T# are gone
    archived = found[f"X#F#{other:020d}"]
    assert {k: v for k, v in archived.items() if k not in {"pk", "sk"}} == {
        "other": {"N": str(other)},
        "at": {"N": str(T)},
        "gen": {"N": "3"},
    }
    assert await dynamo_store.accounts.archived(u, Side.FOLLOWER, LISTED) == [Archived(u, Side.FOLLOWER, other, T)]
    assert await dynamo_store.accounts.archived(u, Side.FOLLOWING, LISTED) == []
    assert (await dynamo_store.accounts.status(u)).edges_done == 0  # late: the job's progress is not moved


async def test_a_late_edge_of_an_account_that_came_back_meanwhile_carries_no_archive_mark(
    dynamo_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The account's deactivation is over; a follow commits, ``settle_late`` reads "deactivated", and
    the account is reactivated before the edge is marked: the edge stays, as it should, and without
    ``arch`` on its ``E#`` (the mark is fenced by the state like the archive), or the stream would
    take a later unfollow of it for an archive (no ``FollowEvent``)."""
    u, follower = fresh_users(2)
    accounts = dynamo_store.accounts
    assert await accounts.change(await accounts.status(u), Lifecycle.DEACTIVATING, T)
    await dynamo_store.finish(u)
    assert await dynamo_store.graph.add_edge(follower, u, T) is Made.CREATED
    mark = accounts.mark

    async def reactivated_first(user_id: int, gen: int, side: Side, edges: Sequence[Edge], *states: Lifecycle) -> bool:
        assert await accounts.change(await accounts.status(u), Lifecycle.REACTIVATING, T + 1)
        monkeypatch.setattr(accounts, "mark", mark)
        return await mark(user_id, gen, side, edges, *states)

    monkeypatch.setattr(accounts, "mark", reactivated_first)
    await accounts.settle_late(u, Side.FOLLOWER, Edge(follower, T))
    assert (await accounts.status(u)).previous is Lifecycle.DEACTIVATED
    assert await dynamo_store.graph.edge_at(follower, u) == T
    live = (await dynamo_store.partition(u))[f"E#{follower:020d}"]
    keys = {"pk": live["pk"], "sk": live["sk"]}
    unfollow = {"eventName": "REMOVE", "dynamodb": {"Keys": keys, "OldImage": live, "SequenceNumber": "1"}}
    assert graph_events(unfollow), "a later unfollow of this edge would be no FollowEvent"
    assert "arch" not in live
