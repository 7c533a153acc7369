"""Applies edge changes to the users' counters with an exactly-once effect.

Per chunk: read the current counters (strongly consistent), compute the new absolute values
(clamped at zero), and write them in ONE transaction together with a *fence*: the checkpoint
move (stream consumer) or one marker per event (Lambda). Every counter write is conditioned on
the version it was computed from, so concurrent shards never lose an update, and the fence
makes a replayed chunk fail as a whole instead of counting twice.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Any

import structlog
from botocore.exceptions import ClientError

from counters.edge_changes import EdgeChange
from graph_service.errors import Unavailable
from graph_service.models import Counts
from graph_service.settings import Settings
from graph_service.store.dynamo_client import AsyncDynamo, cancellation_codes, error_code
from graph_service.store.dynamo_edge_store import DynamoEdgeStore
from graph_service.store.tables import USERS

__all__ = ["MAX_USERS_PER_CHUNK", "CounterApplier", "Fence", "FenceRejected", "chunk_changes"]

log = structlog.get_logger(__name__)
MAX_USERS_PER_CHUNK = 90
MAX_ATTEMPTS = 20


class FenceRejected(Exception):
    """The fence refused the chunk: (some of) it was applied before. ``positions`` says which items."""

    def __init__(self, positions: list[int]) -> None:
        super().__init__(positions)
        self.positions = positions


@dataclass(frozen=True, slots=True)
class Fence:
    """Transaction items that make a chunk apply at most once."""

    items: list[dict[str, Any]]


class CounterApplier:
    def __init__(self, dynamo: AsyncDynamo, settings: Settings) -> None:
        self._dynamo = dynamo
        self._users = settings.table(USERS)
        self._reader = DynamoEdgeStore(dynamo, settings)

    async def read_counts(self, user_ids: list[int]) -> dict[int, Counts]:
        """Current counters, strongly consistent (zeros for users never counted)."""
        return await self._reader.get_counts(user_ids)

    def _update(self, user_id: int, old: Counts, new: Counts) -> dict[str, Any]:
        condition = "attribute_not_exists(ver)" if old.version == 0 else "ver = :old"
        values: dict[str, Any] = {
            ":f": {"N": str(new.followers)},
            ":g": {"N": str(new.following)},
            ":v": {"N": str(new.version)},
        }
        if old.version:
            values[":old"] = {"N": str(old.version)}
        return {
            "Update": {
                "TableName": self._users,
                "Key": {"user_id": {"N": str(user_id)}},
                "UpdateExpression": "SET followers_count = :f, following_count = :g, ver = :v",
                "ConditionExpression": condition,
                "ExpressionAttributeValues": values,
            }
        }

    async def apply(self, changes: list[EdgeChange], fence: Fence) -> dict[int, Counts]:
        """Commit the chunk's deltas with the fence; returns the new counters of every touched user.

        Raises ``FenceRejected`` when the fence refuses (a replay); nothing is written then.
        """
        deltas: dict[int, list[int]] = {}
        for change in changes:
            for user, d_followers, d_following in change.deltas():
                entry = deltas.setdefault(user, [0, 0])
                entry[0] += d_followers
                entry[1] += d_following
        users = sorted(deltas)
        for attempt in range(MAX_ATTEMPTS):
            current = await self.read_counts(users)
            new = {
                u: Counts(
                    followers=max(0, current[u].followers + deltas[u][0]),
                    following=max(0, current[u].following + deltas[u][1]),
                    version=current[u].version + 1,
                )
                for u in users
            }
            if any(current[u].followers + deltas[u][0] < 0 or current[u].following + deltas[u][1] < 0 for u in users):
                log.warning("counter_clamped_at_zero", users=users)
            items = [self._update(u, current[u], new[u]) for u in users] + fence.items
            try:
                await self._dynamo.call("transact_write_items", TransactItems=items)
                return new
            except ClientError as exc:
                if error_code(exc) != "TransactionCanceledException":
                    raise
                codes = cancellation_codes(exc)
                fence_failed = [i for i, code in enumerate(codes[len(users) :]) if code == "ConditionalCheckFailed"]
                if fence_failed:
                    raise FenceRejected(fence_failed) from exc
            await asyncio.sleep(min(0.2, 0.005 * 2**attempt) * random.random())  # noqa: S311 - jitter
        raise Unavailable("counter transaction kept conflicting")


def chunk_changes(changes: list[EdgeChange], max_users: int = MAX_USERS_PER_CHUNK) -> list[list[EdgeChange]]:
    """Split into chunks that touch at most ``max_users`` users each (a transaction holds 100 items)."""
    chunks: list[list[EdgeChange]] = []
    current: list[EdgeChange] = []
    users: set[int] = set()
    for change in changes:
        touched = {change.follower_id, change.followee_id}
        if current and len(users | touched) > max_users:
            chunks.append(current)
            current, users = [], set()
        current.append(change)
        users |= touched
    if current:
        chunks.append(current)
    return chunks
