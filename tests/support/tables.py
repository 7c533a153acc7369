"""The tables of one test: created with change streams only when the test runs a stream consumer.

DynamoDB Local keeps every stream record of the session in memory, deleted tables' included, and
each write costs more the more records it holds: 3,000 follows made 300 later ones three times
slower, and a full session doubled the time of its later tests. A table without a stream writes
about four times faster and leaves nothing behind. Tests that run the counters consumer or the
relay (the ``counters`` or ``event_settings`` fixtures, or a ``streams`` mark) get streams; every
other test's tables have none.
"""

from __future__ import annotations

import asyncio
import contextlib

import boto3
import pytest
from botocore.exceptions import ClientError

from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.provisioning import ensure_tables
from graph_service.dynamodb.tables import FOLLOWERS, TableNames, table_specs
from graph_service.settings import Settings
from tests.support.servers import STREAMED_ENDPOINTS

__all__ = ["STREAM_FIXTURES", "create_tables", "drop_tables", "require_streams", "wants_streams"]

STREAM_FIXTURES = {"counters", "event_settings"}


def wants_streams(request: pytest.FixtureRequest) -> bool:
    """Whether the requesting test runs a stream consumer (a ``streams`` mark or a fixture that starts one)."""
    return request.node.get_closest_marker("streams") is not None or bool(STREAM_FIXTURES & set(request.fixturenames))


async def create_tables(settings: Settings, *, streams: bool) -> None:
    """Every table of ``settings``; with change streams (as production has them) only if ``streams``."""
    if streams:
        STREAMED_ENDPOINTS.add(settings.dynamodb_endpoint)
        await ensure_tables(settings)
        return
    client = boto3.client("dynamodb", endpoint_url=settings.dynamodb_endpoint, region_name=settings.aws_region)

    def create() -> None:
        for spec in table_specs(TableNames(settings.table_prefix)):
            client.create_table(**{k: v for k, v in spec.items() if k != "StreamSpecification"})
        for spec in table_specs(TableNames(settings.table_prefix)):
            client.get_waiter("table_exists").wait(TableName=spec["TableName"], WaiterConfig={"Delay": 0.05})

    await asyncio.to_thread(create)


async def drop_tables(settings: Settings) -> None:
    """Delete every table of ``settings``; one that `socialgraph create-tables` protected loses its
    deletion protection first."""
    client = boto3.client("dynamodb", endpoint_url=settings.dynamodb_endpoint, region_name=settings.aws_region)

    def drop(name: str) -> None:
        with contextlib.suppress(client.exceptions.ResourceNotFoundException):
            try:
                client.delete_table(TableName=name)
            except ClientError as exc:
                if "protected against deletion" not in str(exc):
                    raise
                client.update_table(TableName=name, DeletionProtectionEnabled=False)
                client.delete_table(TableName=name)

    for spec in table_specs(TableNames(settings.table_prefix)):
        await asyncio.to_thread(drop, spec["TableName"])


async def require_streams(settings: Settings, table: str = FOLLOWERS) -> None:
    """Fail at once, with the remedy, when a consumer is started on tables made without streams."""
    dynamo = AsyncDynamo.build(settings)
    try:
        described = await dynamo.call("describe_table", TableName=settings.table(table))
    finally:
        dynamo.close()
    assert described["Table"].get("LatestStreamArn"), (
        f"{settings.table(table)} has no stream: mark the test @pytest.mark.streams (tests/support/tables.py)"
    )
