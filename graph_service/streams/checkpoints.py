"""Per-shard stream checkpoints in DynamoDB (table ``stream_checkpoints``).

A checkpoint is only ever moved by a conditional write that names the position it moves
from, so a replayed or duplicated batch cannot move it twice; a consumer may put that write
in the same transaction as its effects (the counters consumer does, through ``fence_items``).
The same item carries the shard's lease (``owner``, ``lease_until``: ``leases.py``); every write
here names the attributes it sets or removes, so none of them touches the lease.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from botocore.exceptions import ClientError

from graph_service.domain.fences import CheckpointMove, EventMarkers, Fence, FenceRejected
from graph_service.dynamodb.client import AsyncDynamo, error_code
from graph_service.dynamodb.operations import Item, query_all
from graph_service.dynamodb.tables import CHECKPOINTS, TableNames

__all__ = ["DEBT_PREFIX", "Checkpoint", "CheckpointStore", "fence_items"]

DEBT_PREFIX = "debt#"
MARKER_PREFIX = "event#"


def _key(consumer: str, shard_id: str) -> Item:
    return {"consumer": {"S": consumer}, "shard_id": {"S": shard_id}}


def _move(table: str, move: CheckpointMove) -> Item:
    """The update moving a checkpoint, only from the position it names."""
    condition = "attribute_not_exists(seq)" if move.previous is None else "seq = :prev"
    values: Item = {":seq": {"S": move.sequence}, ":note": {"S": move.note}}
    if move.previous is not None:
        values[":prev"] = {"S": move.previous}
    return {
        "TableName": table,
        "Key": _key(move.consumer, move.shard_id),
        "UpdateExpression": "SET seq = :seq, note = :note",
        "ConditionExpression": condition,
        "ExpressionAttributeValues": values,
    }


def fence_items(table: str, fence: Fence) -> list[Item]:
    """The fence as transaction items of the checkpoints table, in the order of its positions."""
    if isinstance(fence, CheckpointMove):
        return [{"Update": _move(table, fence)}]
    return [
        {
            "Put": {
                "TableName": table,
                "Item": {
                    **_key(fence.consumer, f"{MARKER_PREFIX}{event_id}"),
                    "expires_at": {"N": str(fence.expires_at)},
                },
                "ConditionExpression": "attribute_not_exists(consumer)",
            }
        }
        for event_id in fence.event_ids
    ]


@dataclass(frozen=True, slots=True)
class Checkpoint:
    sequence: str | None = None
    """Last sequence number whose effects are committed; None: start at the shard's beginning."""
    done: bool = False
    """The shard is closed and fully processed; its children may start."""
    note: str = ""
    """Consumer-defined: what to redo after a crash (the counters consumer: the last cache repair)."""
    produced: dict[int, int] = field(default_factory=dict)
    """The relay's: per partition of its topic, the first offset of the last batch it produced there
    from this shard and saw acknowledged. Kept when the shard is done; cleared by a rewind."""
    owner: str | None = None
    """The reader holding the shard's lease (``leases.py``, which alone writes it and ``lease_until``)."""
    lease_until: float = 0.0
    """Epoch seconds, the owner's clock, until which it holds the lease."""


class CheckpointStore:
    def __init__(self, dynamo: AsyncDynamo, tables: TableNames, consumer: str) -> None:
        self._dynamo = dynamo
        self._table = tables.table(CHECKPOINTS)
        self.consumer = consumer

    def _key(self, shard_id: str) -> Item:
        return _key(self.consumer, shard_id)

    async def load(self, shard_id: str) -> Checkpoint:
        response = await self._dynamo.call(
            "get_item", TableName=self._table, Key=self._key(shard_id), ConsistentRead=True
        )
        item = response.get("Item")
        return self._parse(item) if item else Checkpoint()

    @staticmethod
    def _parse(item: Item) -> Checkpoint:
        produced = json.loads(item.get("produced", {}).get("S", "{}"))
        return Checkpoint(
            sequence=item.get("seq", {}).get("S"),
            done=item.get("done", {}).get("BOOL", False),
            note=item.get("note", {}).get("S", ""),
            produced={int(partition): int(offset) for partition, offset in produced.items()},
            owner=item.get("owner", {}).get("S"),
            lease_until=float(item.get("lease_until", {}).get("N", "0")),
        )

    async def load_all(self) -> dict[str, Checkpoint]:
        """Every checkpoint of this consumer, by shard."""
        query: Item = {
            "TableName": self._table,
            "KeyConditionExpression": "consumer = :c",
            "ExpressionAttributeValues": {":c": {"S": self.consumer}},
            "ConsistentRead": True,
        }
        return {
            i["shard_id"]["S"]: self._parse(i)
            for i in await query_all(self._dynamo, query)
            if not i["shard_id"]["S"].startswith(DEBT_PREFIX)
        }

    def move(self, shard_id: str, previous: str | None, sequence: str, note: str = "") -> CheckpointMove:
        """The move of this consumer's checkpoint from ``previous`` to ``sequence``, as a fence."""
        return CheckpointMove(self.consumer, shard_id, previous, sequence, note)

    def markers(self, event_ids: list[str], expires_at: int) -> EventMarkers:
        """One marker per stream event of this consumer, as a fence."""
        return EventMarkers(self.consumer, tuple(event_ids), expires_at)

    async def advance(
        self,
        shard_id: str,
        previous: str | None,
        sequence: str,
        note: str = "",
        *,
        produced: Mapping[int, int] | None = None,
    ) -> None:
        """Move the checkpoint alone; ``FenceRejected`` if it is not at ``previous`` (another
        consumer of the shard moved it, or a rewind), as the same move inside a transaction would be.
        ``produced`` (the relay's offsets, see ``Checkpoint.produced``) is written with the move."""
        update = _move(self._table, self.move(shard_id, previous, sequence, note))
        if produced is not None:
            update["UpdateExpression"] += ", produced = :produced"
            update["ExpressionAttributeValues"][":produced"] = {
                "S": json.dumps({str(p): o for p, o in produced.items()})
            }
        try:
            await self._dynamo.call("update_item", **update)
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            raise FenceRejected([0]) from exc

    async def rewind(self, shard_id: str) -> bool:
        """Send the shard back to the start of what its stream retains (and not done, so it is read
        again), forgetting its produced offsets. Unconditional on purpose: a shard that commits a
        batch meanwhile must not escape (its move, conditional on the position it started from, is
        then refused, and its reader starts it again from here). True if it was not at the start."""
        try:
            await self._dynamo.call(
                "update_item",
                TableName=self._table,
                Key=self._key(shard_id),
                UpdateExpression="REMOVE seq, produced, note, done",
                ConditionExpression="attribute_exists(seq) OR attribute_exists(produced) OR attribute_exists(done)",
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            return False
        return True

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
        query: Item = {
            "TableName": self._table,
            "KeyConditionExpression": "consumer = :c AND begins_with(shard_id, :p)",
            "ExpressionAttributeValues": {":c": {"S": self.consumer}, ":p": {"S": DEBT_PREFIX}},
            "ConsistentRead": True,
        }
        return {i["shard_id"]["S"]: i.get("note", {}).get("S", "") for i in await query_all(self._dynamo, query)}

    async def settle_debt(self, key: str) -> None:
        await self._dynamo.call("delete_item", TableName=self._table, Key=self._key(key))

    async def mark_done(self, shard_id: str, sequence: str | None) -> None:
        """The shard is read to its end, its checkpoint at ``sequence``; ``FenceRejected`` if the
        checkpoint is no longer there (a rewind meanwhile: the shard must be read again, not done)."""
        condition = "attribute_not_exists(seq)" if sequence is None else "seq = :seq"
        values: Item = {":t": {"BOOL": True}}
        if sequence is not None:
            values[":seq"] = {"S": sequence}
        try:
            await self._dynamo.call(
                "update_item",
                TableName=self._table,
                Key=self._key(shard_id),
                UpdateExpression="SET done = :t REMOVE note",  # nothing of a finished shard is redone
                ConditionExpression=condition,
                ExpressionAttributeValues=values,
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            raise FenceRejected([0]) from exc
