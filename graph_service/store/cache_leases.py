"""``LeaseRegistry`` in DynamoDB: the serving processes' cache leases, as items of the
``stream_checkpoints`` table under the consumer name ``cache-trust`` (``shard_id`` = ``lease#<ID>``):
``state`` ``live`` or ``revoked``, ``beat`` (heartbeats counted), ``unsettled`` (a write under the
lease left the cache unsettled), and a TTL on ``expires_at`` that reclaims the items of processes
long gone.

Why the store: a serving process cut off from Redis still reaches DynamoDB (it has just committed a
write there), so its heartbeat tells the others it is alive and owes the cache invalidations, and
a revocation written here reaches it where nothing written to Redis could (``cache/lease.py``).
"""

from __future__ import annotations

import time
from typing import Any

from botocore.exceptions import ClientError

from graph_service.domain.models import LeaseRecord
from graph_service.dynamodb.client import AsyncDynamo, error_code
from graph_service.dynamodb.operations import query_all

__all__ = ["CONSUMER", "DynamoLeaseRegistry"]

CONSUMER = "cache-trust"
KEEP_SECONDS = 30 * 86400
"""How long an item outlives its last heartbeat (its TTL)."""
NAMES = {"#s": "state"}  # STATE is a DynamoDB reserved word
LIVE = {":live": {"S": "live"}}


class DynamoLeaseRegistry:
    """Implements ``LeaseRegistry``."""

    def __init__(self, dynamo: AsyncDynamo, table: str) -> None:
        self._dynamo = dynamo
        self._table = table

    @staticmethod
    def _key(lease_id: str) -> dict[str, dict[str, str]]:
        return {"consumer": {"S": CONSUMER}, "shard_id": {"S": f"lease#{lease_id}"}}

    @staticmethod
    def _expires() -> dict[str, str]:
        return {"N": str(int(time.time()) + KEEP_SECONDS)}

    async def register(self, lease_id: str) -> None:
        item = {**self._key(lease_id), "state": {"S": "live"}, "beat": {"N": "0"}, "expires_at": self._expires()}
        if not await self._conditional(
            "put_item", Item=item, ConditionExpression="attribute_not_exists(shard_id)"
        ):  # never over a revoked one
            raise ValueError(f"cache lease {lease_id} was registered before")

    async def beat(self, lease_id: str) -> bool:
        return await self._update_live(lease_id, "SET expires_at = :e ADD beat :one", {":one": {"N": "1"}})

    async def mark_unsettled(self, lease_id: str) -> bool:
        # The beat moves too: a keeper's revocation, conditioned on the beat it saw, then fails, so it
        # cannot act on a read from before the mark (and skip the emptying the mark calls for).
        return await self._update_live(
            lease_id, "SET unsettled = :t, expires_at = :e ADD beat :one", {":t": {"BOOL": True}, ":one": {"N": "1"}}
        )

    async def _update_live(self, lease_id: str, update: str, values: dict[str, Any]) -> bool:
        return await self._conditional(
            "update_item",
            Key=self._key(lease_id),
            UpdateExpression=update,
            ConditionExpression="#s = :live",
            ExpressionAttributeNames=NAMES,
            ExpressionAttributeValues={**values, **LIVE, ":e": self._expires()},
        )

    async def live_leases(self) -> dict[str, LeaseRecord]:
        items = await query_all(
            self._dynamo,
            {
                "TableName": self._table,
                "KeyConditionExpression": "#c = :c AND begins_with(shard_id, :p)",
                "ExpressionAttributeNames": {"#c": "consumer", **NAMES},
                "ExpressionAttributeValues": {":c": {"S": CONSUMER}, ":p": {"S": "lease#"}, **LIVE},
                "FilterExpression": "#s = :live",
                "ConsistentRead": True,
            },
        )
        return {
            item["shard_id"]["S"].removeprefix("lease#"): LeaseRecord(
                beat=int(item.get("beat", {}).get("N", "0")), unsettled=bool(item.get("unsettled", {}).get("BOOL"))
            )
            for item in items
        }

    async def revoke(self, lease_id: str, beat: int) -> bool:
        return await self._conditional(
            "update_item",
            Key=self._key(lease_id),
            UpdateExpression="SET #s = :revoked",
            ConditionExpression="#s = :live AND beat = :beat",
            ExpressionAttributeNames=NAMES,
            ExpressionAttributeValues={":revoked": {"S": "revoked"}, ":beat": {"N": str(beat)}, **LIVE},
        )

    async def is_live(self, lease_id: str) -> bool:
        response = await self._dynamo.call(
            "get_item", TableName=self._table, Key=self._key(lease_id), ConsistentRead=True
        )
        item = response.get("Item")
        return item is not None and item.get("state", {}).get("S") == "live"

    async def forget(self, lease_id: str) -> None:
        await self._dynamo.call("delete_item", TableName=self._table, Key=self._key(lease_id))

    async def _conditional(self, operation: str, **kwargs: Any) -> bool:
        """Run a conditional write; False if its condition refused it."""
        try:
            await self._dynamo.call(operation, TableName=self._table, **kwargs)
        except ClientError as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True
