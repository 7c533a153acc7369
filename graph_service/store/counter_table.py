"""The ``users`` table's counters as the counters consumer reads and writes them.

Every counter write is conditioned on the version it was computed from (``ver``), so two shards
never lose each other's updates, and it commits in one transaction with its fence (a checkpoint
move or event markers), so a replayed batch fails as a whole instead of counting twice.
"""

from __future__ import annotations

from collections.abc import Sequence

from graph_service.domain.fences import CheckpointMove, CounterUpdate, Fence, FenceRejected
from graph_service.domain.models import Counts
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.operations import MAX_TRANSACTION_ITEMS, Item, transact_once
from graph_service.dynamodb.tables import CHECKPOINTS, USERS, TableNames
from graph_service.store.graph_store import load_counts
from graph_service.streams.checkpoints import fence_items

__all__ = ["DynamoCounterTable", "check_one_transaction"]


def check_one_transaction(updates: Sequence[CounterUpdate], fence: Fence) -> None:
    """``ValueError`` for a commit DynamoDB would refuse as invalid: more than 100 items in one
    transaction, or two operations on one item (a chunk is cut to fit, see ``counters.applier``)."""
    marks = [fence.shard_id] if isinstance(fence, CheckpointMove) else list(fence.event_ids)
    items = len(updates) + len(marks)
    if items > MAX_TRANSACTION_ITEMS:
        raise ValueError(f"{items} items in one transaction (at most {MAX_TRANSACTION_ITEMS})")
    if len({u.user_id for u in updates}) < len(updates) or len(set(marks)) < len(marks):
        raise ValueError("two operations on one item in one transaction")


class DynamoCounterTable:
    """Implements ``CounterTable``."""

    def __init__(self, dynamo: AsyncDynamo, tables: TableNames) -> None:
        self._dynamo = dynamo
        self._users = tables.table(USERS)
        self._checkpoints = tables.table(CHECKPOINTS)

    async def read_counts(self, user_ids: Sequence[int]) -> dict[int, Counts]:
        return await load_counts(self._dynamo, self._users, user_ids)

    def _update(self, update: CounterUpdate) -> Item:
        old, new = update.old, update.new
        values: Item = {":f": {"N": str(new.followers)}, ":g": {"N": str(new.following)}, ":v": {"N": str(new.version)}}
        if old.version:
            values[":old"] = {"N": str(old.version)}
        return {
            "Update": {
                "TableName": self._users,
                "Key": {"user_id": {"N": str(update.user_id)}},
                "UpdateExpression": "SET followers_count = :f, following_count = :g, ver = :v",
                "ConditionExpression": "ver = :old" if old.version else "attribute_not_exists(ver)",
                "ExpressionAttributeValues": values,
            }
        }

    async def write_absolute(self, user_id: int, counts: Counts, *, expected_version: int) -> bool:
        """Set one user's counters to ``counts`` (whose version should be ``expected_version + 1``)
        only if ``ver`` is still ``expected_version``: the consumer's own guarded write, without a
        fence, for ``socialgraph reconcile --fix``. False when the version moved (or a consumer
        transaction on the item was in flight); nothing is written then."""
        update = CounterUpdate(user_id, Counts(version=expected_version), counts)
        return await transact_once(self._dynamo, [self._update(update)]) is None

    async def commit(self, updates: Sequence[CounterUpdate], fence: Fence) -> bool:
        """One transaction, tried once: a racing transaction (another shard on the same user) is a
        refusal like a moved version, and the applier reads again before it tries again."""
        check_one_transaction(updates, fence)
        items = [self._update(u) for u in updates] + fence_items(self._checkpoints, fence)
        codes = await transact_once(self._dynamo, items)
        if codes is None:
            return True
        refused = [i for i, code in enumerate(codes[len(updates) :]) if code == "ConditionalCheckFailed"]
        if refused:
            raise FenceRejected(refused)
        return False
