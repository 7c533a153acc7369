"""A user's true follower and followee counts, counted in the edge tables (``Select=COUNT``).

Strongly consistent queries over the membership items (``E#``) of the user's partition in each
table: the figure the counters in the ``users`` table must equal once the counters consumer has
caught up. Nothing is transferred but the counts, page by page (1 MB of keys per page).
"""

from __future__ import annotations

import asyncio

from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.operations import Item
from graph_service.dynamodb.tables import FOLLOWERS, FOLLOWING, TableNames
from graph_service.store import items as it

__all__ = ["EdgeCounter"]


async def count_prefix(dynamo: AsyncDynamo, table: str, owner: int, prefix: str) -> int:
    """How many items of ``owner``'s partition have a sort key starting with ``prefix``."""
    request: Item = {
        "TableName": table,
        "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
        "ExpressionAttributeValues": {":pk": {"N": str(owner)}, ":prefix": {"S": prefix}},
        "Select": "COUNT",
        "ConsistentRead": True,
    }
    total = 0
    while True:
        response = await dynamo.call("query", **request)
        total += int(response.get("Count", 0))
        if "LastEvaluatedKey" not in response:
            return total
        request["ExclusiveStartKey"] = response["LastEvaluatedKey"]


class EdgeCounter:
    """Counts one user's edges in both tables."""

    def __init__(self, dynamo: AsyncDynamo, tables: TableNames) -> None:
        self._dynamo = dynamo
        self._followers = tables.table(FOLLOWERS)
        self._following = tables.table(FOLLOWING)

    async def followers(self, user_id: int) -> int:
        return await count_prefix(self._dynamo, self._followers, user_id, it.EDGE)

    async def following(self, user_id: int) -> int:
        return await count_prefix(self._dynamo, self._following, user_id, it.EDGE)

    async def both(self, user_id: int) -> tuple[int, int]:
        """(followers, following), the two queries at once."""
        followers, following = await asyncio.gather(self.followers(user_id), self.following(user_id))
        return followers, following
