"""Per-shard stream checkpoints in DynamoDB (table ``stream_checkpoints``).

A checkpoint is only ever moved by a conditional write that names the position it moves
from, so a replayed or duplicated batch cannot move it twice; a consumer may put that write
in the same transaction as its effects (the counters consumer does).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from graph_service.settings import Settings
from graph_service.store.dynamo_client import AsyncDynamo
from graph_service.store.tables import CHECKPOINTS

__all__ = ["DEBT_PREFIX", "Checkpoint", "CheckpointStore"]

DEBT_PREFIX = "debt#"


@dataclass(frozen=True, slots=True)
class Checkpoint:
    sequence: str | None = None
    """Last sequence number whose effects are committed; None: start at the shard's beginning."""
    done: bool = False
    """The shard is closed and fully processed; its children may start."""
    note: str = ""
    """Consumer-defined: what to redo after a crash (the counters consumer: the last cache repair)."""


class CheckpointStore:
    def __init__(self, dynamo: AsyncDynamo, settings: Settings, consumer: str) -> None:
        self._dynamo = dynamo
        self._table = settings.table(CHECKPOINTS)
        self.consumer = consumer

    def _key(self, shard_id: str) -> dict[str, Any]:
        return {"consumer": {"S": self.consumer}, "shard_id": {"S": shard_id}}

    async def load(self, shard_id: str) -> Checkpoint:
        response = await self._dynamo.call(
            "get_item", TableName=self._table, Key=self._key(shard_id), ConsistentRead=True
        )
        item = response.get("Item")
        return self._parse(item) if item else Checkpoint()

    @staticmethod
    def _parse(item: dict[str, Any]) -> Checkpoint:
        return Checkpoint(
            sequence=item.get("seq", {}).get("S"),
            done=item.get("done", {}).get("BOOL", False),
            note=item.get("note", {}).get("S", ""),
        )

    async def load_all(self) -> dict[str, Checkpoint]:
        """Every checkpoint of this consumer, by shard."""
        found: dict[str, Checkpoint] = {}
        query: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "consumer = :c",
            "ExpressionAttributeValues": {":c": {"S": self.consumer}},
            "ConsistentRead": True,
        }
        while True:
            response = await self._dynamo.call("query", **query)
            found.update(
                (i["shard_id"]["S"], self._parse(i))
                for i in response["Items"]
                if not i["shard_id"]["S"].startswith(DEBT_PREFIX)
            )
            if "LastEvaluatedKey" not in response:
                return found
            query["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def advance_item(self, shard_id: str, previous: str | None, sequence: str, note: str = "") -> dict[str, Any]:
        """A transaction item moving the checkpoint from ``previous`` to ``sequence``."""
        condition = "attribute_not_exists(seq)" if previous is None else "seq = :prev"
        values: dict[str, Any] = {":seq": {"S": sequence}, ":note": {"S": note}}
        if previous is not None:
            values[":prev"] = {"S": previous}
        return {
            "Update": {
                "TableName": self._table,
                "Key": self._key(shard_id),
                "UpdateExpression": "SET seq = :seq, note = :note",
                "ConditionExpression": condition,
                "ExpressionAttributeValues": values,
            }
        }

    async def advance(self, shard_id: str, previous: str | None, sequence: str, note: str = "") -> None:
        update = self.advance_item(shard_id, previous, sequence, note)["Update"]
        await self._dynamo.call("update_item", **update)

    async def add_debt(self, note: str) -> None:
        """Remember a cache repair that could not be made (Redis unreachable)."""
        if not note or note == "[]":
            return
        await self._dynamo.call(
            "put_item",
            TableName=self._table,
            Item={**self._key(f"{DEBT_PREFIX}{uuid.uuid4().hex}"), "note": {"S": note}},
        )

    async def debts(self) -> dict[str, str]:
        """Owed cache repairs by key."""
        found: dict[str, str] = {}
        query: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "consumer = :c AND begins_with(shard_id, :p)",
            "ExpressionAttributeValues": {":c": {"S": self.consumer}, ":p": {"S": DEBT_PREFIX}},
            "ConsistentRead": True,
        }
        while True:
            response = await self._dynamo.call("query", **query)
            found.update((i["shard_id"]["S"], i.get("note", {}).get("S", "")) for i in response["Items"])
            if "LastEvaluatedKey" not in response:
                return found
            query["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    async def settle_debt(self, key: str) -> None:
        await self._dynamo.call("delete_item", TableName=self._table, Key=self._key(key))

    async def mark_done(self, shard_id: str) -> None:
        await self._dynamo.call(
            "update_item",
            TableName=self._table,
            Key=self._key(shard_id),
            UpdateExpression="SET done = :t REMOVE note",  # nothing of a finished shard is redone
            ExpressionAttributeValues={":t": {"BOOL": True}},
        )
