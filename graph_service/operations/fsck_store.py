"""The edge tables' invariants, one partition at a time, and the counters against them.

A ``followers`` partition's mutes (``fsck_mutes.py``) are judged on the partition alone (both
items of a mute live in it) and confirmed by a snapshot of their keys, as the pairs are; its
account lifecycle items (state, archive) by ``fsck_lifecycle.py``. The ``followers`` partition
pk=0 is the jobs' registry, nobody's: only its entries are checked (``fsck_lifecycle.py``), and
the ``following`` one, which nothing writes, is skipped.

For each partition (one user's items of one table): the pairs its items name are looked at
through the partition itself plus one strongly consistent BatchGetItem of the other side's keys;
a pair that shows a violation is confirmed later (``Confirmer``) by one TransactGetItems of every
key of the pair, a serializable snapshot across both tables: a Follow is one transaction, so a
snapshot never sees half of one, and only what the snapshot shows is reported.

Counters and the following cap's count are judged by ``reconcile``'s own rules, not a copy of them:
a counter that differs from the partition's ``E#`` items goes to ``CountsReconciler`` (without
``fix``): two observations ``settle_seconds`` apart with the same ``ver`` and the same true counts
are drift, anything that moved in every round is only *unconfirmed* (the counters consumer applies
follows about a second after they commit, so a busy account's counter is behind at any moment).
Suspected counters are judged in batches of ``COUNTERS_AT_ONCE``, whose rounds share one settle
wait each. With ``--all``, ``following`` is scanned before ``followers`` (``n`` read before the requests it
counts, as ``reconcile``'s census does) and every user whose ``n`` differs from follows plus
requests gets ``OutgoingReconciler.recheck`` (re-read ``n``, the requests, the follows, the requests
again), which tells drift from a request or an accept made during the scan.

Memory: ``--all`` keeps what the scan saw of every user's outgoing side (``n``, follows, the
accounts requested: some 200 bytes a user) until both edge tables are scanned.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterable

from graph_service.domain.models import Mute
from graph_service.domain.times import now_us
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.operations import Item, batch_get_all, query_all, transact_get
from graph_service.dynamodb.tables import FOLLOWERS, FOLLOWING, USERS, TableNames
from graph_service.operations.edge_counts import EdgeCounter
from graph_service.operations.fsck_confirm import Confirmer
from graph_service.operations.fsck_lifecycle import LifecycleChecker
from graph_service.operations.fsck_mutes import MuteView, evaluate_mute, held, member_sk, mute_items, order_sk
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
from graph_service.operations.reconcile_counts import CountsReconciler
from graph_service.operations.reconcile_outgoing import OutgoingCensus, OutgoingReconciler
from graph_service.operations.reconcile_rules import Outcome, OutgoingFinding, UserFinding
from graph_service.store import account_items as ai
from graph_service.store import items as it
from graph_service.store.counter_table import DynamoCounterTable
from graph_service.store.graph_store import load_counts, parse_counts

__all__ = ["StoreChecker"]

AT = {"#at": "at"}
SNAPSHOT_ROUNDS = 4  # a snapshot that reveals new times asks again for their order items
ROUNDS = 3  # looks at a counter or ``n`` that keeps moving (``settle_seconds`` apart) before it is unconfirmed
COUNTERS_AT_ONCE = 200  # counters judged together: their rounds share one settle wait each
PARTNERS_AT_ONCE = 100  # pairs looked at per BatchGetItem round (a few hundred keys), not a whole celebrity


class StoreChecker:
    """Checks partitions handed over by a scan (``--all``) or read for chosen users."""

    def __init__(
        self, dynamo: AsyncDynamo, tables: TableNames, report: Report, later: Confirmer, *, counters: bool = True
    ) -> None:
        """``counters``: check users' counters too (not while the counters consumer is behind)."""
        self._check_counters = counters
        self._dynamo = dynamo
        self._tables = {FOLLOWERS: tables.table(FOLLOWERS), FOLLOWING: tables.table(FOLLOWING)}
        self._users = tables.table(USERS)
        counter = EdgeCounter(dynamo, tables)
        self._counts = CountsReconciler(
            DynamoCounterTable(dynamo, tables), counter, None, fix=False, settle_seconds=later.settle_seconds,
            rounds=ROUNDS, log_findings=False,
        )  # fmt: skip
        self._outgoing = OutgoingReconciler(dynamo, tables, counter, fix=False, rounds=ROUNDS, log_findings=False)
        self._report = report
        self._later = later
        self._lifecycle = LifecycleChecker(dynamo, self._tables, report, later)
        self._recounted: set[int] = set()
        self._counter_suspects: list[int] = []
        self.outgoing: dict[int, OutgoingCensus] = {}
        """What ``--all`` saw of each user's outgoing side: ``n`` and follows from the ``following``
        scan, then the pending requests from the ``followers`` scan."""
        self.partitions = 0

    # -- one partition ---------------------------------------------------------------------------

    async def check_partition(
        self, table: str, owner: int, items: list[Item], *, outgoing: bool = False, scanning: bool = False
    ) -> None:
        """``table`` is ``followers`` or ``following``; ``outgoing``: note the following cap's count
        (``n``, follows) or the requests the partition holds, for ``check_outgoing`` (``--all``:
        every ``following`` partition before any ``followers`` one); ``scanning``: every partition
        of both tables is being checked (``first_look_keys``)."""
        self.partitions += 1
        if owner == ai.JOBS_PK:  # no user has ID 0
            if table == FOLLOWERS:
                await self._lifecycle.check_jobs(items)
            return
        by_other = pair_items(table, owner, items)
        if outgoing:
            self._note_outgoing(table, owner, items, by_other)
        counters = None
        if self._check_counters:
            counters = asyncio.create_task(load_counts(self._dynamo, self._users, [owner]))
        if table == FOLLOWERS:
            self._check_mutes(owner, items)
        try:
            if table == FOLLOWERS:
                await self._lifecycle.check_account(owner, items)
            others = list(by_other)
            for start in range(0, len(others), PARTNERS_AT_ONCE):
                chunk = {o: by_other[o] for o in others[start : start + PARTNERS_AT_ONCE]}
                for view in await self._first_look(table, owner, chunk, scanning=scanning):
                    if evaluate(view):
                        self._later.add(functools.partial(self._confirm_pair, view))
        finally:
            counts = None if counters is None else (await counters)[owner]
        edges = sum(1 for i in items if str(i["sk"]["S"]).startswith(it.EDGE))
        if counts is not None and edges != (counts.followers if table == FOLLOWERS else counts.following):
            self._suspect_counts(owner)

    def _check_mutes(self, owner: int, items: list[Item]) -> None:
        """The partition's mutes, each whole in it: a suspicion is confirmed later by a snapshot."""
        now = now_us()
        for muted, found in mute_items(items).items():
            view = MuteView(owner, muted, found)
            if evaluate_mute(view, now):
                self._later.add(functools.partial(self._confirm_mute, view))

    def _note_outgoing(
        self, table: str, owner: int, items: list[Item], by_other: dict[int, dict[ItemKey, int]]
    ) -> None:
        if table == FOLLOWING:
            seen = self.outgoing.setdefault(owner, OutgoingCensus())
            seen.follows = sum(1 for i in items if str(i["sk"]["S"]).startswith(it.EDGE))
            seen.n = next((int(i["n"]["N"]) for i in items if i["sk"]["S"] == it.OUTGOING and "n" in i), None)
            return
        for other, found in by_other.items():
            if member_key(FOLLOWERS, owner, it.REQUEST, other) in found:
                self.outgoing.setdefault(other, OutgoingCensus()).requested.append(owner)

    def _suspect_counts(self, user_id: int) -> None:
        """Queue the user's counters for a second look, in batches: each look waits
        ``settle_seconds`` between its observations, so one user per check would keep a worker
        waiting per suspect, and a table of drifted counters (a bulk load) would take hours."""
        if user_id in self._recounted:
            return
        self._recounted.add(user_id)
        self._counter_suspects.append(user_id)
        if len(self._counter_suspects) >= COUNTERS_AT_ONCE:
            self.flush()

    def flush(self) -> None:
        """Queue the counters suspected so far (call once the partitions are checked)."""
        if self._counter_suspects:
            self._later.add(functools.partial(self._confirm_counts, self._counter_suspects))
            self._counter_suspects = []

    def check_outgoing(self) -> None:
        """After both scans: every user whose ``n`` (as the ``following`` scan read it, or none)
        differs from the follows and requests the scans saw is rechecked."""
        for user, seen in self.outgoing.items():
            if seen.drifted:
                self._later.add(functools.partial(self._confirm_outgoing, user, seen))

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
        counts = parse_counts(items[0] if items else None)
        for table, count in ((FOLLOWERS, counts.followers), (FOLLOWING, counts.following)):
            if count and not await self._has_edges(table, user_id):
                self._suspect_counts(user_id)
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

    async def _confirm_mute(self, first: MuteView) -> None:
        """One TransactGetItems of the mute's ``M#``, the ``MT#`` items seen and the one the ``M#``
        read implies (again, with the new one, while a replace keeps moving it)."""
        member = member_sk(first.muted)

        def implied(found: dict[str, Mute]) -> set[str]:
            return {order_sk(found[member])} if member in found else set()

        keys = {member, *first.found, *implied(first.found)}
        found: dict[str, Mute] = {}
        ordered: list[str] = []
        for _ in range(SNAPSHOT_ROUNDS):
            ordered = sorted(keys)
            gets = [
                {
                    "Get": {
                        "TableName": self._tables[FOLLOWERS],
                        "Key": _key(first.muter, sk),
                        "ProjectionExpression": "#o, #at, #exp, #ntf",
                        "ExpressionAttributeNames": it.MUTE_ATTRIBUTES,
                    }
                }
                for sk in ordered
            ]
            items = await transact_get(self._dynamo, gets)
            found = {sk: held(i, first.muted) for sk, i in zip(ordered, items, strict=True) if i is not None}
            if implied(found) <= keys:
                break
            keys |= implied(found)
        view = MuteView(first.muter, first.muted, found, looked=frozenset(ordered))  # what the last snapshot read
        for violation in evaluate_mute(view, now_us()):
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

    async def _confirm_counts(self, user_ids: list[int]) -> None:
        for finding in await self._counts.check(user_ids):
            if finding.outcome is Outcome.CLEAN:
                continue
            suspicion = Violation("counter_drift", finding.user_id, None, _counts_detail(finding))
            if finding.outcome is Outcome.DRIFT:
                self._report.add(suspicion)
            else:
                self._report.add_unconfirmed(suspicion)

    async def _confirm_outgoing(self, user_id: int, seen: OutgoingCensus) -> None:
        finding = await self._outgoing.recheck(user_id, seen)
        if finding.outcome is Outcome.CLEAN:
            return
        suspicion = Violation("outgoing_count", user_id, None, _outgoing_detail(finding))
        if finding.outcome is Outcome.DRIFT:
            self._report.add(suspicion)
        else:
            self._report.add_unconfirmed(suspicion)

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


def _counts_detail(finding: UserFinding) -> str:
    seen = finding.seen
    return (
        f"users followers_count={seen.stored.followers} following_count={seen.stored.following}"
        f" (ver {seen.stored.version}); edge tables: {seen.followers} followers, {seen.following} following"
    )


def _outgoing_detail(finding: OutgoingFinding) -> str:
    stored = "none" if finding.stored is None else str(finding.stored)
    return (
        f"following pk={finding.user_id} O n={stored}; {finding.follows} follows + {finding.requests} pending requests"
    )
