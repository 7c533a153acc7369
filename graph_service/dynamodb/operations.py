"""The DynamoDB loops every adapter needs, each written once: query all pages, batch-get every
key, commit a transaction through conflicts, read a snapshot through conflicts.

Every retry here is bounded and backs off with jitter; past the bound the call is ``Unavailable``
(safe for the caller to retry later), never an endless loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from botocore.exceptions import ClientError

from graph_service.domain.errors import Unavailable
from graph_service.domain.retry import Backoff
from graph_service.dynamodb.client import AsyncDynamo, cancellation_codes, error_code

__all__ = [
    "MAX_ATTEMPTS",
    "MAX_TRANSACTION_ITEMS",
    "Item",
    "backoff",
    "batch_get_all",
    "conditional",
    "query_all",
    "transact_get",
    "transact_once",
    "transact_write",
]

Item = dict[str, Any]
MAX_ATTEMPTS = 8
MAX_TRANSACTION_ITEMS = 100
BATCH_GET_KEYS = 100
CANCELLED = "TransactionCanceledException"


async def backoff(attempt: int, *, base: float = 0.01, cap: float = 0.5) -> None:
    """Full jitter: a random wait below ``base * 2**attempt``, at most ``cap`` seconds (the
    project's ``Backoff`` with no floor)."""
    await asyncio.sleep(Backoff(base, cap, floor=0.0).delay(attempt))


async def conditional(dynamo: AsyncDynamo, operation: str, **kwargs: Any) -> bool:
    """Run one conditional write (``put_item``, ``update_item``, ``delete_item``); False if its
    condition refused it."""
    try:
        await dynamo.call(operation, **kwargs)
    except ClientError as exc:
        if error_code(exc) == "ConditionalCheckFailedException":
            return False
        raise
    return True


async def query_all(dynamo: AsyncDynamo, query: Item, *, limit: int | None = None) -> list[Item]:
    """Every item the query matches (following ``LastEvaluatedKey``), or only the first ``limit``."""
    request = dict(query)
    items: list[Item] = []
    while limit is None or len(items) < limit:
        if limit is not None:
            request["Limit"] = limit - len(items)
        response = await dynamo.call("query", **request)
        items.extend(response["Items"])
        if "LastEvaluatedKey" not in response:
            break
        request["ExclusiveStartKey"] = response["LastEvaluatedKey"]
    return items


async def batch_get_all(
    dynamo: AsyncDynamo,
    table: str,
    keys: Sequence[Item],
    *,
    consistent: bool,
    projection: str | None = None,
    names: dict[str, str] | None = None,
) -> list[Item]:
    """BatchGetItem of any number of keys: chunks of 100 in parallel, unprocessed keys asked again
    with backoff, ``MAX_ATTEMPTS`` times at most per chunk."""

    async def chunk(part: Sequence[Item]) -> list[Item]:
        spec: Item = {"Keys": list(part), "ConsistentRead": consistent}
        if projection:
            spec["ProjectionExpression"] = projection
        if names:
            spec["ExpressionAttributeNames"] = names
        request: Item = {table: spec}
        found: list[Item] = []
        for attempt in range(MAX_ATTEMPTS):
            response = await dynamo.call("batch_get_item", RequestItems=request)
            found.extend(response.get("Responses", {}).get(table, []))
            request = response.get("UnprocessedKeys") or {}
            if not request:
                return found
            await backoff(attempt)
        raise Unavailable("DynamoDB kept leaving keys unprocessed")

    parts = [keys[i : i + BATCH_GET_KEYS] for i in range(0, len(keys), BATCH_GET_KEYS)]
    results = await asyncio.gather(*(chunk(p) for p in parts))
    return [item for result in results for item in result]


async def transact_once(dynamo: AsyncDynamo, items: list[Item]) -> list[str] | None:
    """One TransactWriteItems: None when it committed, else the per-item cancellation codes
    (``ConditionalCheckFailed`` for a condition, ``TransactionConflict`` for a racing transaction);
    nothing was written then."""
    try:
        await dynamo.call("transact_write_items", TransactItems=items)
    except ClientError as exc:
        if error_code(exc) != CANCELLED:
            raise
        return cancellation_codes(exc)
    return None


async def transact_write(dynamo: AsyncDynamo, items: list[Item], *, attempts: int = MAX_ATTEMPTS) -> list[str] | None:
    """Commit one TransactWriteItems. None when it committed; the per-item cancellation codes when
    a condition failed (nothing was written). Conflicts with other transactions are tried again."""
    for attempt in range(attempts):
        codes = await transact_once(dynamo, items)
        if codes is None or "ConditionalCheckFailed" in codes:
            return codes
        await backoff(attempt)  # TransactionConflict and friends: try again
    raise Unavailable("DynamoDB transaction kept conflicting")


async def transact_get(dynamo: AsyncDynamo, gets: list[Item]) -> list[Item | None]:
    """One TransactGetItems (a serializable snapshot); each item, or None where absent. A write of
    these items in flight cancels the read: it is tried again."""
    for attempt in range(MAX_ATTEMPTS):
        try:
            response = await dynamo.call("transact_get_items", TransactItems=gets)
        except ClientError as exc:
            if error_code(exc) != CANCELLED:
                raise
            await backoff(attempt)
            continue
        return [r.get("Item") for r in response["Responses"]]
    raise Unavailable("DynamoDB kept cancelling a snapshot read")
