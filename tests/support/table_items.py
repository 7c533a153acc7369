"""Every item of a test's tables, read straight from DynamoDB: a cheap check that calls changed
nothing stored, where reading the same through the API would take hundreds of RPCs.

``stored_items`` scans each table of the settings (strongly consistent) except ``stream_checkpoints``,
which holds the serving processes' cache-lease heartbeats (``store/cache_leases.py``) and so changes
while any server runs. A test compares the items of one moment with those of another: every item and
attribute must be equal, apart from three that no reader can tell from what they stand for
(``graph_service/store``), which ``stored_items`` folds away:

- a settings item (``followers`` ``sk=P``) is compared by ``private`` alone: its ``at`` is written
  by every SetPrivacy and read by nothing, so setting the privacy an account already has is a no-op;
- a settings item with ``private`` false is no item at all (every reader takes a missing one as public);
- an outgoing count (``following`` ``sk=O``) of 0 is no item at all (the following cap's condition
  and ``reconcile`` take a missing count as 0): a follow and its unfollow leave one behind.
"""

from __future__ import annotations

import asyncio
from typing import Any

from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import CHECKPOINTS, FOLLOWERS, FOLLOWING, TableNames, table_specs
from graph_service.operations.scanning import scan_pages
from graph_service.settings import Settings
from graph_service.store import items as it

__all__ = ["Items", "differences", "partition_items", "stored_items"]

Item = dict[str, Any]
Items = dict[str, dict[str, Item]]
"""Table name (without the prefix) -> its items by their key (``"pk=2 sk=E#…"``), as DynamoDB returns them."""


def _key(item: Item, key_names: list[str]) -> str:
    return " ".join(f"{name}={next(iter(item[name].values()))}" for name in key_names)


def _settled(table: str, item: Item) -> Item | None:
    """The item as readers see it: ``None`` when it is the same as no item (see the module docstring)."""
    sort_key = item.get("sk", {}).get("S")
    if table == FOLLOWERS and sort_key == it.SETTINGS:
        if not item.get("private", {}).get("BOOL", False):
            return None
        return {k: v for k, v in item.items() if k != "at"}
    if table == FOLLOWING and sort_key == it.OUTGOING and item.get("n") == {"N": "0"}:
        return None
    return item


async def stored_items(settings: Settings) -> Items:
    """Every item of every table of ``settings`` but ``stream_checkpoints``, read strongly consistently."""
    prefix = len(settings.table(""))
    specs = [s for s in table_specs(TableNames(settings.table_prefix)) if s["TableName"] != settings.table(CHECKPOINTS)]
    dynamo = AsyncDynamo.build(settings)

    async def scan(spec: dict[str, Any]) -> dict[str, Item]:
        table = spec["TableName"][prefix:]
        key_names = [k["AttributeName"] for k in spec["KeySchema"]]
        found: dict[str, Item] = {}
        async for page in scan_pages(dynamo, spec["TableName"]):
            for item in page.items:
                settled = _settled(table, item)
                if settled is not None:
                    found[_key(item, key_names)] = settled
        return found

    try:
        tables = await asyncio.gather(*(scan(s) for s in specs))
    finally:
        dynamo.close()
    return {spec["TableName"][prefix:]: items for spec, items in zip(specs, tables, strict=True)}


def differences(before: Items, after: Items) -> list[str]:
    """What changed from ``before`` to ``after``, one line per item added, removed or changed."""
    lines = []
    for table in sorted(before.keys() | after.keys()):
        old, new = before.get(table, {}), after.get(table, {})
        for key in sorted(old.keys() | new.keys()):
            if key not in new:
                lines.append(f"{table} {key} removed: {old[key]}")
            elif key not in old:
                lines.append(f"{table} {key} added: {new[key]}")
            elif old[key] != new[key]:
                lines.append(f"{table} {key} changed: {old[key]} -> {new[key]}")
    return lines


async def partition_items(dynamo: AsyncDynamo, table: str, owner: int) -> dict[str, Item]:
    """Every item of one partition (``table`` is the full name), strongly consistent, by sort key."""
    response = await dynamo.call(
        "query",
        TableName=table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"N": str(owner)}},
        ConsistentRead=True,
    )
    return {i["sk"]["S"]: i for i in response["Items"]}
