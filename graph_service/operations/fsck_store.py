"""The edge tables' invariants, one partition at a time, and the counters against them.

For each partition (one user's items of one table): the pairs its items name are looked at
through the partition itself plus one strongly consistent BatchGetItem of the other side's keys;
a pair that shows a violation is confirmed later (``Confirmer``) by one TransactGetItems of every
key of the pair, a serializable snapshot across both tables: a Follow is one transaction, so a
snapshot never sees half of one, and only what the snapshot shows is reported. Counters are
compared with the partition's ``E#`` items, and a difference is recounted (``EdgeCounter``) while
the counter's version stands still before it is reported.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterable

from graph_service.domain.models import Counts
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.operations import Item, batch_get_all, query_all, transact_get
from graph_service.dynamodb.tables import FOLLOWERS, FOLLOWING, USERS
from graph_service.operations.edge_counts import EdgeCounter
from graph_service.operations.fsck_confirm import Confirmer
from graph_service.operations.fsck_pairs import (
    ItemKey,
    PairView,
    evaluate,
    first_look_keys,
    implied_orders,
    item_key,
    member_key,
    member_keys,
    pair_items,
)
from graph_service.operations.fsck_report import Report, Violation
from graph_service.settings import Settings
from graph_service.store import items as it
from graph_service.store.graph_store import load_counts

__all__ = ["StoreChecker"]

AT = {"#at": "at"}
SNAPSHOT_ROUNDS = 4  # a snapshot that reveals new times asks again for their order items
COUNT_ROUNDS = 3  # a recount while the counter moves is tried again
PARTNERS_AT_ONCE = 100  # pairs looked at per BatchGetItem round (a few hundred keys), not a whole celebrity


class StoreChecker:
    """Checks partitions handed over by a scan (``--all``) or read for chosen users."""

    def __init__(self, dynamo: AsyncDynamo, settings: Settings, report: Report, later: Confirmer) -> None:
        self._dynamo = dynamo
        self._tables = {FOLLOWERS: settings.table(FOLLOWERS), FOLLOWING: settings.table(FOLLOWING)}
        self._users = settings.table(USERS)
        self._counter = EdgeCounter(dynamo, settings)
        self._report = report
        self._later = later
        self._recounted: set[int] = set()
        self.requests_by: dict[int, set[int]] = {}
        """requester -> the accounts it has a pending request to, as the followers scan saw them."""
        self.partitions = 0
        self._outgoing_checked: set[int] = set()  # partitions of following seen, among requesters

    # -- one partition ---------------------------------------------------------------------------

    async def check_partition(
        self, table: str, owner: int, items: list[Item], *, outgoing: bool = False, scanning: bool = False
    ) -> None:
        """``table`` is ``followers`` or ``following``; ``outgoing`` compares the following cap's
        count (``O``) with the follows and the requests the followers scan recorded; ``scanning``:
        every partition of both tables is being checked (``first_look_keys``)."""
        self.partitions += 1
        by_other = pair_items(table, owner, items)
        if table == FOLLOWERS:
            for other, found in by_other.items():
                if member_key(FOLLOWERS, owner, it.REQUEST, other) in found:
                    self.requests_by.setdefault(other, set()).add(owner)
        counters = asyncio.create_task(load_counts(self._dynamo, self._users, [owner]))
        try:
            others = list(by_other)
            for start in range(0, len(others), PARTNERS_AT_ONCE):
                chunk = {o: by_other[o] for o in others[start : start + PARTNERS_AT_ONCE]}
                for view in await self._first_look(table, owner, chunk, scanning=scanning):
                    if evaluate(view):
                        self._later.add(functools.partial(self._confirm_pair, view))
        finally:
            counts = (await counters)[owner]
        edges = sum(1 for i in items if str(i["sk"]["S"]).startswith(it.EDGE))
        if edges != (counts.followers if table == FOLLOWERS else counts.following):
            self._later.add(lambda: self._confirm_counts(owner))
        if outgoing:
            if owner in self.requests_by:
                self._outgoing_checked.add(owner)
            made = next((_n(i) for i in items if i["sk"]["S"] == it.OUTGOING), 0)
            if made != edges + len(self.requests_by.get(owner, ())):
                self._later.add(lambda: self._confirm_outgoing(owner))

    async def check_requesters_without_partition(self) -> None:
        """After the following scan: a requester with no partition in ``following`` at all (not even
        the ``O`` item its request should have moved) has a count of 0 that its requests contradict."""
        for requester in set(self.requests_by) - self._outgoing_checked:
            self._later.add(functools.partial(self._confirm_outgoing, requester))

    async def check_user(self, user_id: int) -> None:
        """Both partitions of one user (read whole, strongly consistent); outgoing requests live in
        other users' partitions, so the following cap's count is left to ``--all``."""
        for table in (FOLLOWERS, FOLLOWING):
            query: Item = {
                "TableName": self._tables[table],
                "KeyConditionExpression": "pk = :pk",
                "ExpressionAttributeValues": {":pk": {"N": str(user_id)}},
                "ConsistentRead": True,
            }
            await self.check_partition(table, user_id, await query_all(self._dynamo, query))

    async def check_counter_item(self, user_id: int, items: list[Item]) -> None:
        """A users item whose counter says a user has edges where no partition has any (a partition
        with edges was compared with its counter when the scan handed it over)."""
        counts = _counts(items[0]) if items else Counts()
        for table, count in ((FOLLOWERS, counts.followers), (FOLLOWING, counts.following)):
            if count and not await self._has_edges(table, user_id):
                self._later.add(lambda: self._confirm_counts(user_id))
                return

    # -- first look --------------------------------------------------------------------------------

    async def _first_look(
        self, table: str, owner: int, by_other: dict[int, dict[ItemKey, int]], *, scanning: bool
    ) -> list[PairView]:
        wanted = {
            other: first_look_keys(table, owner, other, local, scanning=scanning) for other, local in by_other.items()
        }
        found = await self._batch_read({k for keys in wanted.values() for k in keys})
        return [
            PairView(
                owner,
                other,
                {**local, **{k: found[k] for k in wanted[other] if k in found}},
                looked=frozenset(wanted[other]),
                complete=frozenset({(table, owner)}),
            )
            for other, local in by_other.items()
        ]

    async def _batch_read(self, keys: Iterable[ItemKey]) -> dict[ItemKey, int]:
        by_table: dict[str, list[Item]] = {}
        for table, pk, sk in keys:
            by_table.setdefault(table, []).append(_key(pk, sk))
        results = await asyncio.gather(
            *(
                batch_get_all(self._dynamo, self._tables[t], ks, consistent=True, projection="pk, sk, #at", names=AT)
                for t, ks in by_table.items()
            )
        )
        return {item_key(t, i): int(i["at"]["N"]) for t, items in zip(by_table, results, strict=True) for i in items}

    # -- confirmations -------------------------------------------------------------------------------

    async def _confirm_pair(self, first: PairView) -> None:
        keys = set(member_keys(first.a, first.b)) | set(first.found) | implied_orders(first.found)
        found: dict[ItemKey, int] = {}
        for _ in range(SNAPSHOT_ROUNDS):
            found = await self._snapshot(sorted(keys))
            missing = implied_orders(found) - keys
            if not missing:
                break
            keys |= missing
        for violation in evaluate(PairView(first.a, first.b, found, looked=frozenset(keys))):
            self._report.add(violation)

    async def _snapshot(self, keys: list[ItemKey]) -> dict[ItemKey, int]:
        gets = [
            {
                "Get": {
                    "TableName": self._tables[table],
                    "Key": _key(pk, sk),
                    "ProjectionExpression": "#at",
                    "ExpressionAttributeNames": AT,
                }
            }
            for table, pk, sk in keys
        ]
        items = await transact_get(self._dynamo, gets)
        return {key: int(item["at"]["N"]) for key, item in zip(keys, items, strict=True) if item is not None}

    async def _confirm_counts(self, user_id: int) -> None:
        if user_id in self._recounted:
            return
        self._recounted.add(user_id)
        for _ in range(COUNT_ROUNDS):
            before = (await load_counts(self._dynamo, self._users, [user_id]))[user_id]
            followers, following = await self._counter.both(user_id)
            after = (await load_counts(self._dynamo, self._users, [user_id]))[user_id]
            if before.version == after.version:
                break
        if (after.followers, after.following) != (followers, following):
            detail = (
                f"users followers_count={after.followers} following_count={after.following} (ver {after.version});"
                f" edge tables: {followers} followers, {following} following"
            )
            self._report.add(Violation("counter_drift", user_id, None, detail))

    async def _confirm_outgoing(self, user_id: int) -> None:
        requested = sorted(self.requests_by.get(user_id, ()))
        request_keys = [member_key(FOLLOWERS, other, it.REQUEST, user_id) for other in requested]
        for _ in range(COUNT_ROUNDS):
            before = await self._made(user_id)
            follows = await self._counter.following(user_id)
            pending = len(await self._batch_read(request_keys))
            after = await self._made(user_id)
            if before == after:
                break
        if after != follows + pending:
            detail = f"following pk={user_id} O n={after}; {follows} follows + {pending} pending requests"
            self._report.add(Violation("outgoing_count", user_id, None, detail))

    async def _made(self, user_id: int) -> int:
        response = await self._dynamo.call(
            "get_item", TableName=self._tables[FOLLOWING], Key=it.outgoing_key(user_id), ConsistentRead=True
        )
        return _n(response["Item"]) if "Item" in response else 0

    async def _has_edges(self, table: str, user_id: int) -> bool:
        query: Item = {
            "TableName": self._tables[table],
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :e)",
            "ExpressionAttributeValues": {":pk": {"N": str(user_id)}, ":e": {"S": it.EDGE}},
            "ConsistentRead": True,
            "ProjectionExpression": "pk",
        }
        return bool(await query_all(self._dynamo, query, limit=1))


def _key(pk: int, sk: str) -> Item:
    return {"pk": {"N": str(pk)}, "sk": {"S": sk}}


def _n(item: Item) -> int:
    return int(item.get("n", {}).get("N", "0"))


def _counts(item: Item) -> Counts:
    return Counts(
        followers=int(item.get("followers_count", {}).get("N", "0")),
        following=int(item.get("following_count", {}).get("N", "0")),
    )
