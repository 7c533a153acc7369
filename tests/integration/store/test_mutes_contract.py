"""Mutes on DynamoDB Local keep the mutes contract (which the in-memory fake keeps too), with the item
layout, the TTL attribute and the transactions docs/architecture.md describes."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator

import pytest

from graph_service.domain.models import Mute
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.operations import Item
from graph_service.dynamodb.tables import FOLLOWERS, TableNames
from graph_service.settings import Settings
from graph_service.store import items as it
from graph_service.store.graph_store import DynamoGraphStore
from tests.support.contracts.mutes import HOUR, MuteContract, MutesUnderTest, T
from tests.support.table_items import partition_items


class Store:
    def __init__(self, settings: Settings) -> None:
        self.dynamo = AsyncDynamo.build(settings)
        self.table = settings.table(FOLLOWERS)
        self.store = DynamoGraphStore(self.dynamo, TableNames(settings.table_prefix))

    async def seed(self, muter_id: int, made: list[Mute]) -> None:
        """Both items of each mute, 25 a BatchWriteItem (a transaction each would take seconds)."""
        bodies = [
            it.mute_item(key, m)
            for m in made
            for key in (it.key(it.MUTE, muter_id, m.user_id), it.order_key(it.MUTE_ORDER, muter_id, m))
        ]
        for start in range(0, len(bodies), 25):
            request: dict[str, list[Item]] = {
                self.table: [{"PutRequest": {"Item": b}} for b in bodies[start : start + 25]]
            }
            while request:
                request = (await self.dynamo.call("batch_write_item", RequestItems=request)).get("UnprocessedItems", {})

    async def partition(self, owner: int) -> dict[str, Item]:
        return await partition_items(self.dynamo, self.table, owner)


@pytest.fixture
async def store(shared_tables: Settings) -> AsyncIterator[Store]:
    value = Store(shared_tables)
    try:
        yield value
    finally:
        value.dynamo.close()


class TestDynamoMutes(MuteContract):
    @pytest.fixture
    def mutes(self, store: Store) -> MutesUnderTest:
        s = store.store
        return MutesUnderTest(s, s, s, s, store.seed)


def fresh_users(n: int) -> list[int]:
    """n user IDs no other test uses (the tables are shared by the module)."""
    start = random.randrange(1, 2**40) * 1000
    return list(range(start, start + n))


async def test_a_mute_is_two_items_in_the_muters_partition_with_the_ttl_attribute(store: Store) -> None:
    a, b, c = fresh_users(3)
    await store.store.put_mute(a, Mute(b, T, T + HOUR + 1, True), replacing=None)
    await store.store.put_mute(a, Mute(c, T + 1, 0, False), replacing=None)
    found = await store.partition(a)
    member, order = found[f"M#{b:020d}"], found[f"MT#{T:016d}#{b:020d}"]
    expected = {"other": {"N": str(b)}, "at": {"N": str(T)}, "exp": {"N": str(T + HOUR + 1)}, "ntf": {"BOOL": True}}
    ttl = {"expires_at": {"N": str(T // 1_000_000 + 3601)}}  # rounded up: never before the mute ended
    assert {k: v for k, v in member.items() if k not in {"pk", "sk"}} == {**expected, **ttl}
    assert {k: v for k, v in order.items() if k not in {"pk", "sk"}} == {**expected, **ttl}
    assert "expires_at" not in found[f"M#{c:020d}"]  # until unmuted: nothing for TTL to reclaim
    assert "expires_at" not in found[f"MT#{T + 1:016d}#{c:020d}"]
    # The muted account's partition holds only the reverse items (found when it is deleted).
    assert {sk: i.get("expires_at") for sk, i in (await store.partition(b)).items()} == {
        f"m#{a:020d}": ttl["expires_at"]
    }
    assert set(await store.partition(c)) == {f"m#{a:020d}"}


async def test_a_replace_moves_the_order_item_and_a_remove_deletes_both(store: Store) -> None:
    a, b = fresh_users(2)
    first, later = Mute(b, T, 0, False), Mute(b, T + 7, T + HOUR, False)
    await store.store.put_mute(a, first, replacing=None)
    assert await store.store.put_mute(a, later, replacing=first)
    assert set(await store.partition(a)) == {f"M#{b:020d}", f"MT#{T + 7:016d}#{b:020d}"}
    assert await store.store.remove_mute(a, later)
    assert await store.partition(a) == {}
    assert await store.partition(b) == {}  # its reverse went with it
