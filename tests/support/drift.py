"""Planting drift for the ``reconcile`` tests: counters, the following cap's count and pending
requests written straight into the tables, as a bug, an outage or a bulk import would leave them."""

from __future__ import annotations

import redis.asyncio as aioredis

from graph_service.cache import keys
from graph_service.domain.models import Counts, Edge
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.operations import Item
from graph_service.dynamodb.tables import FOLLOWERS, FOLLOWING, USERS
from graph_service.settings import Settings
from graph_service.store import items as it

__all__ = ["cached_count_hash", "plant_counts", "plant_n", "plant_request", "read_n", "stored_counts"]


def _counts_item(user: int, counts: Counts) -> Item:
    return {
        "user_id": {"N": str(user)},
        "followers_count": {"N": str(counts.followers)},
        "following_count": {"N": str(counts.following)},
        "ver": {"N": str(counts.version)},
    }


async def _batch_put(dynamo: AsyncDynamo, table: str, rows: list[Item]) -> None:
    for start in range(0, len(rows), 25):
        request = {table: [{"PutRequest": {"Item": row}} for row in rows[start : start + 25]]}
        while request:
            request = (await dynamo.call("batch_write_item", RequestItems=request)).get("UnprocessedItems") or {}


async def plant_counts(dynamo: AsyncDynamo, settings: Settings, rows: dict[int, Counts]) -> None:
    """Overwrite ``users`` rows (counters and ``ver``) as they are given."""
    await _batch_put(dynamo, settings.table(USERS), [_counts_item(u, c) for u, c in rows.items()])


async def plant_n(dynamo: AsyncDynamo, settings: Settings, rows: dict[int, int]) -> None:
    """Overwrite users' following cap counts ``n``."""
    items = [{**it.outgoing_key(u), "n": {"N": str(n)}} for u, n in rows.items()]
    await _batch_put(dynamo, settings.table(FOLLOWING), items)


async def plant_request(dynamo: AsyncDynamo, settings: Settings, requester: int, user: int, at_us: int) -> None:
    """A pending request of ``requester`` to ``user`` (its two items), not counted in any ``n``."""
    request = Edge(requester, at_us)
    items = [
        it.item(it.key(it.REQUEST, user, requester), request),
        it.item(it.order_key(it.REQUEST_ORDER, user, request), request),
    ]
    await _batch_put(dynamo, settings.table(FOLLOWERS), items)


async def stored_counts(dynamo: AsyncDynamo, settings: Settings, user: int) -> Counts | None:
    """The ``users`` row as stored (None: no row)."""
    response = await dynamo.call(
        "get_item", TableName=settings.table(USERS), Key={"user_id": {"N": str(user)}}, ConsistentRead=True
    )
    row = response.get("Item")
    if row is None:
        return None
    return Counts(int(row["followers_count"]["N"]), int(row["following_count"]["N"]), int(row["ver"]["N"]))


async def read_n(dynamo: AsyncDynamo, settings: Settings, user: int) -> int | None:
    response = await dynamo.call(
        "get_item", TableName=settings.table(FOLLOWING), Key=it.outgoing_key(user), ConsistentRead=True
    )
    found = response.get("Item", {}).get("n")
    return int(found["N"]) if found else None


async def cached_count_hash(settings: Settings, user: int) -> dict[str, str]:
    """The count cache's hash of ``user`` as Redis holds it (``fl``, ``fg``, ``v``; empty: none)."""
    client = aioredis.Redis.from_url(settings.redis_url, decode_responses=True)
    try:
        found: dict[str, str] = await client.hgetall(keys.counts(user))  # type: ignore[assignment,misc,unused-ignore]  # redis-py: a reply or an awaitable
        return found
    finally:
        await client.aclose()
