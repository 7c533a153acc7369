"""Seeds many follows straight into the edge tables, in batches, for tests whose subject is not the
Follow path (walks, intersections, counters over big lists): DynamoDB Local writes about 100
transactions a second on the test machine, and a batch of 25 plain items is several times cheaper.

The items are the graph store's own (``graph_service/store/items.py``), so a seeded follow is the same
four items a Follow writes; only the transaction's conditions are skipped, so seed only pairs that
have no follow, request or block yet.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from graph_service.domain.models import Edge
from graph_service.domain.times import now_us
from graph_service.domain.tweet_ids import TweetIdGenerator
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.operations import Item, backoff
from graph_service.dynamodb.tables import FOLLOWERS, FOLLOWING, TWEETS
from graph_service.settings import Settings
from graph_service.store import items as it

__all__ = ["seed_follows", "seed_tweets"]

BATCH_WRITE_ITEMS = 25
CONCURRENCY = 8


def _edge_items(settings: Settings, follower: int, followee: int, at_us: int) -> list[tuple[str, Item]]:
    followers, following = settings.table(FOLLOWERS), settings.table(FOLLOWING)
    made, mirror = Edge(follower, at_us), Edge(followee, at_us)
    return [
        (followers, it.item(it.key(it.EDGE, followee, follower), made)),
        (followers, it.item(it.order_key(it.EDGE_ORDER, followee, made), made)),
        (following, it.item(it.key(it.EDGE, follower, followee), mirror)),
        (following, it.item(it.order_key(it.EDGE_ORDER, follower, mirror), mirror)),
    ]


async def _write(dynamo: AsyncDynamo, batch: list[tuple[str, Item]]) -> None:
    request: dict[str, list[Item]] = {}
    for table, item in batch:
        request.setdefault(table, []).append({"PutRequest": {"Item": item}})
    for attempt in range(10):
        response = await dynamo.call("batch_write_item", RequestItems=request)
        request = response.get("UnprocessedItems") or {}
        if not request:
            return
        await backoff(attempt)
    raise AssertionError("DynamoDB Local kept items unprocessed while seeding")


async def seed_follows(settings: Settings, pairs: Sequence[tuple[int, int]]) -> list[int]:
    """Write a follow for each (follower, followee), the later pairs made later; returns their times."""
    start = now_us()
    times = [start + i for i in range(len(pairs))]
    items = [i for (a, b), at in zip(pairs, times, strict=True) for i in _edge_items(settings, a, b, at)]
    await _write_all(settings, items)
    return times


async def seed_tweets(settings: Settings, author_id: int, n: int) -> list[int]:
    """``n`` tweets of ``author_id`` in the tweets table, as ``DynamoTweetStore.post`` writes them
    (IDs from the same generator, so they increase); returns their IDs, oldest first."""
    ids = TweetIdGenerator()
    tweet_ids = [ids.next_id() for _ in range(n)]
    table = settings.table(TWEETS)
    items: list[tuple[str, Item]] = [
        (table, {"tweet_id": {"N": str(t)}, "author_id": {"N": str(author_id)}, "text": {"S": f"tweet {k}"}})
        for k, t in enumerate(tweet_ids)
    ]
    await _write_all(settings, items)
    return sorted(tweet_ids)


async def _write_all(settings: Settings, items: list[tuple[str, Item]]) -> None:
    batches = [items[k : k + BATCH_WRITE_ITEMS] for k in range(0, len(items), BATCH_WRITE_ITEMS)]
    dynamo = AsyncDynamo.build(settings)
    gate = asyncio.Semaphore(CONCURRENCY)

    async def write(batch: list[tuple[str, Item]]) -> None:
        async with gate:
            await _write(dynamo, batch)

    try:
        await asyncio.gather(*(write(b) for b in batches))
    finally:
        dynamo.close()
