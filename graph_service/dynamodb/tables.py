"""Table definitions and idempotent creation, for DynamoDB Local and AWS alike.

``followers`` and ``following`` share one key schema: ``pk`` (N, the owner of the list)
and ``sk`` (S). Each edge is four items written in one transaction (docs/architecture.md):

    followers  pk=followee  sk=E#<follower>          membership: IsFollowing, idempotency
    followers  pk=followee  sk=T#<at>#<follower>     newest-first order of the followers list
    following  pk=follower  sk=E#<followee>
    following  pk=follower  sk=T#<at>#<followee>

No local secondary index, so a partition (one user's list) has no 10 GB item-collection cap.

Two tables have DynamoDB TTL on ``expires_at`` (``TTL_TABLES``): ``stream_checkpoints`` (the
Lambda consumer's replay markers, the cache leases) and ``followers`` (mutes given a duration:
their ``M#``/``MT#`` items are reclaimed once the mute has ended; no other item of it has the
attribute).

``tweets`` (pk ``tweet_id`` N; ``author_id`` N, ``text`` S) stands in locally for the tweet
service's table: its stream is what the relay turns into ``TweetCreated`` events.

``socialgraph create-tables`` (the command, what production runs) also protects every table:
deletion protection, and point-in-time recovery where the endpoint has it (DynamoDB Local has not:
it answers ``UnknownOperationException``, and the command goes on without it). The local stack and
the tests make theirs unprotected, so that they can drop them. ``deploy/aws/socialgraph.yaml``
declares the same tables; tests/deploy/test_aws_template.py keeps the two equal.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import structlog
from botocore.exceptions import ClientError

from graph_service.dynamodb.client import AsyncDynamo, error_code

__all__ = [
    "CHECKPOINTS",
    "FOLLOWERS",
    "FOLLOWING",
    "TTL_ATTRIBUTE",
    "TTL_TABLES",
    "TWEETS",
    "USERS",
    "TableNames",
    "create_tables",
    "table_specs",
]

log = structlog.get_logger(__name__)

FOLLOWERS = "followers"
FOLLOWING = "following"
USERS = "users"
CHECKPOINTS = "stream_checkpoints"
TWEETS = "tweets"
TTL_ATTRIBUTE = "expires_at"
"""The TTL attribute (epoch seconds) of the ``TTL_TABLES``."""
TTL_TABLES = (CHECKPOINTS, FOLLOWERS)
"""The tables whose items DynamoDB's TTL deletes once ``expires_at`` has passed: the Lambda consumer's
replay markers and the cache leases (``stream_checkpoints``), mutes that have ended (``followers``)."""
BACKUPS_WAIT_SECONDS = 300.0
"""How long a new table may say its backups are not ready yet (``ContinuousBackupsUnavailableException``)."""
BACKUPS_RETRY_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class TableNames:
    """The full names of one deployment's tables: what the adapters need of the settings."""

    prefix: str
    """Put before every short name (``SG_TABLE_PREFIX``), so several deployments can share an account."""

    def table(self, name: str) -> str:
        """The full name of one of the project's tables (``name``: its short name, e.g. ``FOLLOWERS``)."""
        return f"{self.prefix}{name}"


def _spec(name: str, keys: list[tuple[str, str, str]], stream: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "TableName": name,
        "KeySchema": [{"AttributeName": n, "KeyType": k} for n, _, k in keys],
        "AttributeDefinitions": [{"AttributeName": n, "AttributeType": t} for n, t, _ in keys],
        "BillingMode": "PAY_PER_REQUEST",
    }
    if stream:
        spec["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
    return spec


def table_specs(tables: TableNames) -> list[dict[str, Any]]:
    edge_keys = [("pk", "N", "HASH"), ("sk", "S", "RANGE")]
    return [
        _spec(tables.table(FOLLOWERS), edge_keys, stream=True),
        _spec(tables.table(FOLLOWING), edge_keys),
        _spec(tables.table(USERS), [("user_id", "N", "HASH")]),
        _spec(tables.table(CHECKPOINTS), [("consumer", "S", "HASH"), ("shard_id", "S", "RANGE")]),
        _spec(tables.table(TWEETS), [("tweet_id", "N", "HASH")], stream=True),
    ]


async def _wait_active(dynamo: AsyncDynamo, name: str) -> dict[str, Any]:
    timeout = 120.0
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        table: dict[str, Any] = (await dynamo.call("describe_table", TableName=name))["Table"]
        if table["TableStatus"] == "ACTIVE":
            return table
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"table {name} not ACTIVE after {timeout}s")
        await asyncio.sleep(0.5)


async def _ensure(dynamo: AsyncDynamo, spec: dict[str, Any], *, protect: bool) -> bool:
    """Create one table unless it exists; turn on its stream if a stream is wanted, and with
    ``protect`` its deletion protection and point-in-time recovery. True if created."""
    name = spec["TableName"]
    created = True
    try:
        await dynamo.call("create_table", **spec, **({"DeletionProtectionEnabled": True} if protect else {}))
    except ClientError as exc:
        if error_code(exc) != "ResourceInUseException":
            raise
        created = False
    table = await _wait_active(dynamo, name)
    wanted = spec.get("StreamSpecification")
    if wanted and not table.get("StreamSpecification", {}).get("StreamEnabled"):
        await dynamo.call("update_table", TableName=name, StreamSpecification=wanted)
        table = await _wait_active(dynamo, name)
    if protect:
        if not table.get("DeletionProtectionEnabled"):
            await dynamo.call("update_table", TableName=name, DeletionProtectionEnabled=True)
            await _wait_active(dynamo, name)
        await _recover_to_any_point(dynamo, name)
    return created


async def _recover_to_any_point(dynamo: AsyncDynamo, name: str) -> None:
    """Point-in-time recovery on (idempotent). A table made a moment ago may refuse for a while;
    DynamoDB Local has no backups at all."""
    deadline = asyncio.get_running_loop().time() + BACKUPS_WAIT_SECONDS
    while True:
        try:
            await dynamo.call(
                "update_continuous_backups",
                TableName=name,
                PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True},
            )
        except ClientError as exc:
            code = error_code(exc)
            if code == "UnknownOperationException":  # DynamoDB Local
                log.warning("point_in_time_recovery_unsupported", table=name, hint="DynamoDB Local has no backups")
                return
            if code != "ContinuousBackupsUnavailableException" or asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(BACKUPS_RETRY_SECONDS)
            continue
        return


async def _expire_items(dynamo: AsyncDynamo, name: str) -> None:
    """TTL on ``expires_at`` (idempotent): replay markers and cache leases age out, ended mutes are reclaimed."""
    described = await dynamo.call("describe_time_to_live", TableName=name)
    if described.get("TimeToLiveDescription", {}).get("TimeToLiveStatus") in {"ENABLED", "ENABLING"}:
        return
    await dynamo.call(
        "update_time_to_live",
        TableName=name,
        TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE},
    )


async def create_tables(dynamo: AsyncDynamo, tables: TableNames, *, protect: bool = False) -> list[str]:
    """Create every missing table; returns the names created by this call. Safe to repeat.
    ``protect``: every table, new or not, gets deletion protection and point-in-time recovery.
    (``dynamodb.provisioning.ensure_tables`` does it with a client of its own.)"""
    specs = table_specs(tables)
    created = await asyncio.gather(*(_ensure(dynamo, spec, protect=protect) for spec in specs))
    await asyncio.gather(*(_expire_items(dynamo, tables.table(name)) for name in TTL_TABLES))
    return [spec["TableName"] for spec, was_created in zip(specs, created, strict=True) if was_created]
