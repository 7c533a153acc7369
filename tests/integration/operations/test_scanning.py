"""Parallel scans hand over whole partitions once each, or pages of at most ``page_size`` items;
sampling picks existing keys; failures surface as themselves."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest
from botocore.exceptions import ClientError

from graph_service.domain.errors import Unavailable
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import FOLLOWERS
from graph_service.operations.scanning import (
    approximate_item_count,
    for_each_page,
    for_each_partition,
    sample_partition_keys,
)
from graph_service.settings import Settings
from tests.support.seeding import seed_follows

# Followee -> how many followers: one partition spans several scan pages of 50 items.
SIZES = {1: 130, 2: 1, 3: 2, 4: 5, 5: 1, 6: 3, 7: 1, 8: 4, 9: 1, 10: 2, 11: 1, 12: 1}


@pytest.fixture
async def seeded(settings: Settings) -> Settings:
    """Followers partitions of the sizes above (two items per follow: E# and T#)."""
    pairs = [(1000 + i, followee) for followee, size in SIZES.items() for i in range(size)]
    await seed_follows(settings, pairs)
    return settings


async def test_every_partition_is_handed_over_once_whole(seeded: Settings) -> None:
    for segments in (1, 3):
        handled: Counter[int] = Counter()
        sizes: dict[int, int] = {}
        pages: list[int] = []

        async def handle(pk: int, items: list[dict[str, Any]]) -> None:
            handled[pk] += 1  # noqa: B023 - used before the loop moves on
            sizes[pk] = len(items)  # noqa: B023 - used before the loop moves on
            assert {int(i["pk"]["N"]) for i in items} == {pk}

        dynamo = AsyncDynamo.build(seeded)
        try:
            await for_each_partition(
                dynamo, seeded.table(FOLLOWERS), handle, segments=segments, page_size=50, on_items=pages.append
            )
        finally:
            dynamo.close()
        assert handled == Counter(dict.fromkeys(SIZES, 1)), segments
        assert sizes == {pk: 2 * size for pk, size in SIZES.items()}
        assert sum(pages) == 2 * sum(SIZES.values())


async def test_pages_never_exceed_page_size_and_cover_every_item_once(seeded: Settings) -> None:
    """A partition of 260 items (followee 1) comes in pages of 50 at most: what a census tallies
    without ever holding a partition whole."""
    for segments in (1, 3):
        seen: Counter[tuple[int, str]] = Counter()
        largest = 0
        progress: list[int] = []

        async def handle(items: list[dict[str, Any]]) -> None:
            nonlocal largest
            largest = max(largest, len(items))
            seen.update((int(i["pk"]["N"]), i["sk"]["S"]) for i in items)  # noqa: B023 - used before the loop moves on

        dynamo = AsyncDynamo.build(seeded)
        try:
            await for_each_page(
                dynamo, seeded.table(FOLLOWERS), handle, segments=segments, page_size=50, on_items=progress.append
            )
            with pytest.raises(ValueError, match="segments"):
                await for_each_page(dynamo, seeded.table(FOLLOWERS), handle, segments=0)
        finally:
            dynamo.close()
        assert largest == 50, segments
        assert set(seen.values()) == {1}
        per_partition = Counter(pk for pk, _ in seen)
        assert per_partition == Counter({pk: 2 * size for pk, size in SIZES.items()})
        assert sum(progress) == 2 * sum(SIZES.values())


async def test_a_failing_handler_or_table_raises_its_own_exception(seeded: Settings) -> None:
    dynamo = AsyncDynamo.build(seeded)

    async def fail(pk: int, items: list[dict[str, Any]]) -> None:
        raise Unavailable("DynamoDB went away")

    try:
        with pytest.raises(Unavailable, match="went away"):  # not an ExceptionGroup: the CLI maps it to exit 3
            await for_each_partition(dynamo, seeded.table(FOLLOWERS), fail, segments=4)
        with pytest.raises(ClientError, match="ResourceNotFoundException"):
            await for_each_partition(dynamo, seeded.table("nothing"), fail, segments=2)
        with pytest.raises(ValueError, match="segments"):
            await for_each_partition(dynamo, seeded.table(FOLLOWERS), fail, segments=0)
    finally:
        dynamo.close()


async def test_sampling_gives_distinct_existing_keys_and_a_small_table_all_of_them(seeded: Settings) -> None:
    dynamo = AsyncDynamo.build(seeded)
    table = seeded.table(FOLLOWERS)
    try:
        some = await sample_partition_keys(dynamo, table, 5, rng=random.Random(7))
        every = await sample_partition_keys(dynamo, table, 20, rng=random.Random(7))
        none = await sample_partition_keys(dynamo, table, 0)
        count = await approximate_item_count(dynamo, table)
    finally:
        dynamo.close()
    assert len(some) == 5
    assert len(set(some)) == 5
    assert set(some) <= set(SIZES)
    assert sorted(every) == sorted(SIZES)
    assert none == []
    assert count == 2 * sum(SIZES.values())  # DynamoDB Local keeps it exact; AWS refreshes it every ~6 hours
