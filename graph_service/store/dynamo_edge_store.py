"""The edge store on DynamoDB: transactional writes, strongly consistent reads."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from typing import Any

from botocore.exceptions import ClientError

from graph_service.errors import Unavailable
from graph_service.models import Counts, Cursor, Direction, Edge, EdgePage, FollowResult, now_us
from graph_service.settings import Settings
from graph_service.store.dynamo_client import AsyncDynamo, cancellation_codes, error_code
from graph_service.store.tables import FOLLOWERS, FOLLOWING, USERS

__all__ = ["DynamoEdgeStore", "edge_key", "parse_counts"]

MAX_TX_ATTEMPTS = 8
LIST_END = "T#~"  # sorts after every T#<digits> key


def edge_key(owner: int, other: int) -> dict[str, Any]:
    return {"pk": {"N": str(owner)}, "sk": {"S": f"E#{other:020d}"}}


def _order_key(owner: int, edge: Edge) -> dict[str, Any]:
    return {"pk": {"N": str(owner)}, "sk": {"S": f"T#{edge.position}"}}


def _item(key: dict[str, Any], edge: Edge) -> dict[str, Any]:
    return {**key, "other": {"N": str(edge.user_id)}, "at": {"N": str(edge.at_us)}}


def parse_counts(item: dict[str, Any] | None) -> Counts:
    if not item:
        return Counts()
    return Counts(
        followers=max(0, int(item.get("followers_count", {}).get("N", "0"))),
        following=max(0, int(item.get("following_count", {}).get("N", "0"))),
        version=int(item.get("ver", {}).get("N", "0")),
    )


async def _backoff(attempt: int) -> None:
    await asyncio.sleep(min(0.5, 0.01 * 2**attempt) * random.random())  # noqa: S311 - jitter


class DynamoEdgeStore:
    """Implements ``EdgeStore``. Counters are read here but written only by the counters consumer."""

    def __init__(self, dynamo: AsyncDynamo, settings: Settings) -> None:
        self._dynamo = dynamo
        self._followers = settings.table(FOLLOWERS)
        self._following = settings.table(FOLLOWING)
        self._users = settings.table(USERS)

    def _table(self, direction: Direction) -> str:
        return self._followers if direction is Direction.FOLLOWERS else self._following

    async def _transact(self, items: list[dict[str, Any]]) -> list[str] | None:
        """Run a transaction, retrying conflicts; the per-item codes if a condition failed, else None."""
        for attempt in range(MAX_TX_ATTEMPTS):
            try:
                await self._dynamo.call("transact_write_items", TransactItems=items)
                return None
            except ClientError as exc:
                if error_code(exc) != "TransactionCanceledException":
                    raise
                codes = cancellation_codes(exc)
                if "ConditionalCheckFailed" in codes:
                    return codes
                await _backoff(attempt)  # TransactionConflict and friends: try again
        raise Unavailable("DynamoDB transaction kept conflicting")

    async def follow(self, follower_id: int, followee_id: int) -> FollowResult:
        for _ in range(MAX_TX_ATTEMPTS):
            created = Edge(user_id=follower_id, at_us=now_us())
            reverse = Edge(user_id=followee_id, at_us=created.at_us)
            absent = "attribute_not_exists(pk)"
            items = [
                {
                    "Put": {
                        "TableName": self._followers,
                        "Item": _item(edge_key(followee_id, follower_id), created),
                        "ConditionExpression": absent,
                    }
                },
                {
                    "Put": {
                        "TableName": self._followers,
                        "Item": _item(_order_key(followee_id, created), created),
                    }
                },
                {
                    "Put": {
                        "TableName": self._following,
                        "Item": _item(edge_key(follower_id, followee_id), reverse),
                        "ConditionExpression": absent,
                    }
                },
                {
                    "Put": {
                        "TableName": self._following,
                        "Item": _item(_order_key(follower_id, reverse), reverse),
                    }
                },
            ]
            if await self._transact(items) is None:
                return FollowResult(created=True, at_us=created.at_us)
            existing = await self._get_edge(follower_id, followee_id)
            if existing is not None:
                return FollowResult(created=False, at_us=existing)
            # The edge vanished between the cancelled write and the read: an unfollow won; go again.
        raise Unavailable("follow kept racing concurrent unfollows")

    async def _get_edge(self, follower_id: int, followee_id: int) -> int | None:
        """The follow timestamp, read with strong consistency, or None."""
        response = await self._dynamo.call(
            "get_item",
            TableName=self._followers,
            Key=edge_key(followee_id, follower_id),
            ConsistentRead=True,
            ProjectionExpression="#at",
            ExpressionAttributeNames={"#at": "at"},
        )
        item = response.get("Item")
        return int(item["at"]["N"]) if item else None

    async def unfollow(self, follower_id: int, followee_id: int) -> int | None:
        for _ in range(MAX_TX_ATTEMPTS):
            at = await self._get_edge(follower_id, followee_id)
            if at is None:
                return None
            items = [
                {
                    "Delete": {
                        "TableName": self._followers,
                        "Key": edge_key(followee_id, follower_id),
                        "ConditionExpression": "#at = :at",
                        "ExpressionAttributeNames": {"#at": "at"},
                        "ExpressionAttributeValues": {":at": {"N": str(at)}},
                    }
                },
                {
                    "Delete": {
                        "TableName": self._followers,
                        "Key": _order_key(followee_id, Edge(follower_id, at)),
                    }
                },
                {"Delete": {"TableName": self._following, "Key": edge_key(follower_id, followee_id)}},
                {
                    "Delete": {
                        "TableName": self._following,
                        "Key": _order_key(follower_id, Edge(followee_id, at)),
                    }
                },
            ]
            if await self._transact(items) is None:
                return at
            # The edge changed under us (removed, or re-made with a new timestamp): read again.
        raise Unavailable("unfollow kept racing concurrent writes")

    async def is_following(self, follower_id: int, followee_id: int) -> bool:
        return await self._get_edge(follower_id, followee_id) is not None

    async def list_edges(self, direction: Direction, user_id: int, limit: int, after: Cursor | None) -> EdgePage:
        # Keys are fixed-width, so "strictly before the cursor" is "at most the cursor's ID minus one".
        upper = LIST_END if after is None else f"T#{Edge(after.user_id - 1, after.at_us).position}"
        query: dict[str, Any] = {
            "TableName": self._table(direction),
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :lo AND :hi",
            "ExpressionAttributeValues": {
                ":pk": {"N": str(user_id)},
                ":lo": {"S": "T#"},
                ":hi": {"S": upper},
            },
            "ScanIndexForward": False,
            "ConsistentRead": True,
            "ProjectionExpression": "#o, #at",
            "ExpressionAttributeNames": {"#o": "other", "#at": "at"},
        }
        entries: list[Edge] = []
        while len(entries) <= limit:
            response = await self._dynamo.call("query", Limit=limit + 1 - len(entries), **query)
            entries.extend(Edge(int(i["other"]["N"]), int(i["at"]["N"])) for i in response["Items"])
            if "LastEvaluatedKey" not in response:
                break
            query["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        return EdgePage(entries=entries[:limit], has_more=len(entries) > limit)

    async def get_counts(self, user_ids: Sequence[int]) -> dict[int, Counts]:
        wanted = list(dict.fromkeys(user_ids))
        found: dict[int, Counts] = {}
        for start in range(0, len(wanted), 100):
            keys: list[dict[str, Any]] = [{"user_id": {"N": str(u)}} for u in wanted[start : start + 100]]
            request: dict[str, Any] = {self._users: {"Keys": keys, "ConsistentRead": True}}
            for attempt in range(MAX_TX_ATTEMPTS):
                response = await self._dynamo.call("batch_get_item", RequestItems=request)
                for item in response["Responses"].get(self._users, []):
                    found[int(item["user_id"]["N"])] = parse_counts(item)
                request = response.get("UnprocessedKeys") or {}
                if not request:
                    break
                await _backoff(attempt)
            else:
                raise Unavailable("DynamoDB kept leaving keys unprocessed")
        return {u: found.get(u, Counts()) for u in wanted}

    async def close(self) -> None:
        self._dynamo.close()
