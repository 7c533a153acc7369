"""Shard leases: at most one reader of a shard at a time among the instances of one consumer.

As the Kinesis Client Library does it, with conditional writes and an expiry: the lease lives on
the shard's own checkpoint item (``owner``, ``lease_until`` in epoch seconds), so no other table is
needed, and every write here touches only those two attributes (the checkpoint's ``seq``, ``note``,
``produced`` and ``done`` are the ``CheckpointStore``'s, whose writes in turn leave these two alone).

- **acquire**: only if the shard has no owner, its lease has expired, or it is already this owner's
  (and the shard is not done);
- **renew**: only while this instance is still the owner; the renewal also returns the item, so
  the reader sees a checkpoint that another process rewound under it;
- **release**: only if still the owner (a clean stop, a finished shard): a survivor takes it at once.

Each lease is granted for ``GRANT`` of ``SG_LEASE_SECONDS``, renewed every fifth of it, and
expired leases are looked for every tenth, so a survivor takes over a dead owner's shard within
0.8 x ``SG_LEASE_SECONDS`` plus a few calls' latency.

Expiry compares the owner's clock (it writes ``lease_until``) with the survivor's (it reads it).
A live owner's lease always has half a lease left, so a survivor whose clock runs ahead by less
than that never takes a live owner's shard; one whose clock runs behind takes a dead owner's that
much later, so the clocks must agree within a fifth of a lease (2 s at the default of 10 s; NTP or
the cloud's time service keep them within milliseconds) for the takeover to stay within
``SG_LEASE_SECONDS``. A clock off by more costs time, not correctness: two readers of one shard for
a while are safe, since every checkpoint move is conditional on the position it moves from (the
counters' effects commit with that move; the relay's repeats are idempotent downstream).
"""

from __future__ import annotations

import math
import os
import secrets
import socket
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

from botocore.exceptions import ClientError

from graph_service.dynamodb.client import AsyncDynamo, error_code
from graph_service.dynamodb.operations import Item
from graph_service.dynamodb.tables import CHECKPOINTS, TableNames

__all__ = ["GRANT", "LeaseClock", "LeaseView", "Renewal", "ShardLeases", "fair_share", "owner_id"]

GRANT = 0.7
"""A lease is granted for this share of ``SG_LEASE_SECONDS``: the rest is the margin in which a
survivor notices the expiry (one check interval) and its acquisition lands."""
RENEWALS_PER_LEASE = 5
"""Renewals per ``SG_LEASE_SECONDS``: a lease survives two failed renewals in a row."""
LOOKS_PER_LEASE = 10
"""Looks for free or expired leases per ``SG_LEASE_SECONDS`` (one query of the consumer's checkpoints)."""
NAMES = {"#owner": "owner"}  # OWNER is a DynamoDB reserved word


def owner_id() -> str:
    """This reader's name in the leases: host, process and a random part (two readers of one
    process, or a restarted process that got the same pid, never share a name)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


@dataclass(frozen=True, slots=True)
class LeaseClock:
    """The lease's timing, from ``SG_LEASE_SECONDS``."""

    lease_seconds: float

    @property
    def grant_seconds(self) -> float:
        """How long an acquisition or a renewal holds the shard."""
        return self.lease_seconds * GRANT

    @property
    def renew_seconds(self) -> float:
        """How often an owner renews its leases."""
        return self.lease_seconds / RENEWALS_PER_LEASE

    @property
    def look_seconds(self) -> float:
        """How often a reader looks for free or expired leases."""
        return self.lease_seconds / LOOKS_PER_LEASE

    @property
    def takeover_seconds(self) -> float:
        """The longest a dead owner's shard waits for a survivor (but for the calls' latency): its
        lease runs at most one grant past its death, and a survivor looks one interval later."""
        return self.grant_seconds + self.look_seconds


@dataclass(frozen=True, slots=True)
class LeaseView:
    """What a checkpoint item says of its lease."""

    owner: str | None = None
    until: float = 0.0
    """Epoch seconds (the owner's clock) until which the owner holds the shard."""

    def held_by_other(self, me: str, now: float) -> bool:
        """The rule ``acquire`` enforces, read ahead so a standby does not write in vain: another
        owner whose lease has not expired."""
        return self.owner is not None and self.owner != me and self.until >= now

    def live_owner(self, now: float) -> str | None:
        return self.owner if self.owner is not None and self.until >= now else None


def fair_share(readable: int, owners: Collection[str], me: str) -> int:
    """How many shards this reader takes at most: an even share among the owners that hold live
    leases and itself, rounded up (all of them when it is alone). No lease is ever stolen, so this
    only decides who takes the shards that become free: a new child shard, a dead owner's."""
    instances = len(set(owners) | {me})
    return math.ceil(readable / instances)


@dataclass(frozen=True, slots=True)
class Renewal:
    """A renewed lease and the checkpoint as the renewal left it."""

    sequence: str | None
    """The stored ``seq``: absent while the reader has committed one means a rewind by another process."""


class ShardLeases:
    """The leases of one consumer's shards (the consumer of a ``CheckpointStore``), held by ``owner``
    for ``lease_seconds`` (``SG_LEASE_SECONDS``)."""

    def __init__(
        self,
        dynamo: AsyncDynamo,
        tables: TableNames,
        consumer: str,
        *,
        lease_seconds: float,
        owner: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._dynamo = dynamo
        self._table = tables.table(CHECKPOINTS)
        self.consumer = consumer
        self.owner = owner if owner is not None else owner_id()
        self.timing = LeaseClock(lease_seconds)
        self._clock = clock

    def _key(self, shard_id: str) -> Item:
        return {"consumer": {"S": self.consumer}, "shard_id": {"S": shard_id}}

    def _until(self) -> Item:
        return {"N": f"{self._clock() + self.timing.grant_seconds:.3f}"}

    async def _conditional(self, shard_id: str, **update: object) -> Item | None:
        """One conditional update of the lease attributes; its new item, or None if refused."""
        try:
            response = await self._dynamo.call(
                "update_item",
                TableName=self._table,
                Key=self._key(shard_id),
                ExpressionAttributeNames=NAMES,
                ReturnValues="ALL_NEW",
                **update,
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            return None
        attributes: Item = response.get("Attributes", {})
        return attributes

    async def acquire(self, shard_id: str) -> bool:
        """Take the shard if it is free, expired or already ours and not done; True if taken."""
        item = await self._conditional(
            shard_id,
            UpdateExpression="SET #owner = :me, lease_until = :until",
            ConditionExpression=(
                "(attribute_not_exists(#owner) OR #owner = :me OR lease_until < :now)"
                " AND (attribute_not_exists(done) OR done <> :done)"
            ),
            ExpressionAttributeValues={
                ":me": {"S": self.owner},
                ":until": self._until(),
                ":now": {"N": f"{self._clock():.3f}"},
                ":done": {"BOOL": True},
            },
        )
        return item is not None

    async def renew(self, shard_id: str) -> Renewal | None:
        """Extend the lease while it is still ours; None if another owner has it (or it was released)."""
        item = await self._conditional(
            shard_id,
            UpdateExpression="SET lease_until = :until",
            ConditionExpression="#owner = :me",
            ExpressionAttributeValues={":me": {"S": self.owner}, ":until": self._until()},
        )
        if item is None:
            return None
        return Renewal(sequence=item.get("seq", {}).get("S"))

    async def release(self, shard_id: str) -> bool:
        """Give the shard up if it is still ours; True if this call released it."""
        try:
            await self._dynamo.call(
                "update_item",
                TableName=self._table,
                Key=self._key(shard_id),
                UpdateExpression="REMOVE #owner, lease_until",
                ConditionExpression="#owner = :me",
                ExpressionAttributeNames=NAMES,
                ExpressionAttributeValues={":me": {"S": self.owner}},
            )
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            return False
        return True

    def now(self) -> float:
        return self._clock()
