"""``LeaseRegistry`` in DynamoDB: the serving processes' cache leases, as items of the
``stream_checkpoints`` table under the consumer name ``cache-trust`` (``shard_id`` = ``lease#<ID>``),
``state`` ``live`` or ``revoked``, with a TTL on ``expires_at`` that reclaims the items of
processes long gone.

Why the store: a serving process cut off from Redis can still reach DynamoDB (it has just
committed a write there), so a revocation written here reaches it where nothing written to Redis
could (``cache/lease.py``, "revoked").
"""

from __future__ import annotations

import time
from collections.abc import Collection

from botocore.exceptions import ClientError

from graph_service.dynamodb.client import AsyncDynamo, error_code
from graph_service.dynamodb.operations import query_all

__all__ = ["CONSUMER", "DynamoLeaseRegistry"]

CONSUMER = "cache-trust"
KEEP_SECONDS = 30 * 86400
"""How long an item outlives its last registration (its TTL): far longer than a process runs
between restarts; a live process's item older than this reads as revoked (the safe side)."""


class DynamoLeaseRegistry:
    """Implements ``LeaseRegistry``."""

    def __init__(self, dynamo: AsyncDynamo, table: str) -> None:
        self._dynamo = dynamo
        self._table = table

    @staticmethod
    def _key(lease_id: str) -> dict[str, dict[str, str]]:
        return {"consumer": {"S": CONSUMER}, "shard_id": {"S": f"lease#{lease_id}"}}

    async def register(self, lease_id: str) -> None:
        try:
            await self._put_live(lease_id)
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                raise ValueError(f"cache lease {lease_id} was registered before") from exc
            raise

    async def _put_live(self, lease_id: str) -> None:
        await self._dynamo.call(
            "put_item",
            TableName=self._table,
            Item={
                **self._key(lease_id),
                "state": {"S": "live"},
                "expires_at": {"N": str(int(time.time()) + KEEP_SECONDS)},
            },
            ConditionExpression="attribute_not_exists(shard_id)",  # never over a revoked one
        )

    async def is_live(self, lease_id: str) -> bool:
        response = await self._dynamo.call(
            "get_item", TableName=self._table, Key=self._key(lease_id), ConsistentRead=True
        )
        item = response.get("Item")
        return item is not None and item.get("state", {}).get("S") == "live"

    async def revoke_all_except(self, keep: Collection[str]) -> list[str]:
        items = await query_all(
            self._dynamo,
            {
                "TableName": self._table,
                "KeyConditionExpression": "#c = :c AND begins_with(shard_id, :p)",
                "ExpressionAttributeNames": {"#c": "consumer", "#s": "state"},
                "ExpressionAttributeValues": {":c": {"S": CONSUMER}, ":p": {"S": "lease#"}, ":live": {"S": "live"}},
                "FilterExpression": "#s = :live",
                "ConsistentRead": True,
            },
        )
        kept = set(keep)
        revoked: list[str] = []
        for item in items:
            lease_id = item["shard_id"]["S"].removeprefix("lease#")
            if lease_id in kept:
                continue
            try:
                await self._dynamo.call(
                    "update_item",
                    TableName=self._table,
                    Key=self._key(lease_id),
                    UpdateExpression="SET #s = :revoked",
                    ConditionExpression="#s = :live",
                    ExpressionAttributeNames={"#s": "state"},
                    ExpressionAttributeValues={":revoked": {"S": "revoked"}, ":live": {"S": "live"}},
                )
            except ClientError as exc:
                if error_code(exc) != "ConditionalCheckFailedException":
                    raise
                continue  # revoked or forgotten meanwhile
            revoked.append(lease_id)
        return revoked

    async def forget(self, lease_id: str) -> None:
        await self._dynamo.call("delete_item", TableName=self._table, Key=self._key(lease_id))
