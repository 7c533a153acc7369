"""The following cap's count against the follows and pending requests it stands for.

``following`` pk=A, sk=``O`` holds ``n``, A's follows plus pending requests, moved by every
transaction that makes or removes one of them. Edges and requests written before that item existed
(or straight into the tables) were never counted. A's follows are one ``Select=COUNT`` query; A's
pending requests are ``R#<A>`` items in *other* users' partitions of ``followers``, which only a
scan finds, so this check runs only in ``reconcile --all``, fed by its census.

Why a fix is safe (up to one residual race): every transaction that changes A's follows plus
requests moves ``n`` with it, except an accept, which turns a request into a follow and keeps
the total. The census reads A's ``n`` before it scans the ``followers`` table for requests. A
recheck then reads ``n`` again (it must still equal the census's: no follow, request or removal
by A since, so no request the scan could have missed), reads the census's requests again, counts
A's follows, reads the requests once more (an accept in between shows as a difference, and the
recheck is tried again), and writes the total only if ``n`` still holds the value read first. The
residual race: two changes of A's total that cancel out (a follow and an unfollow, a new request
and a dropped follow) between the census and the write leave ``n`` at its old value while the
items moved, and the write can then be off by the difference; the next run corrects it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import structlog

from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.operations import Item, batch_get_all, transact_once
from graph_service.dynamodb.tables import FOLLOWERS, FOLLOWING, TableNames
from graph_service.operations.edge_counts import EdgeCounter
from graph_service.operations.reconcile_rules import Outcome, OutgoingFinding
from graph_service.store import items as it

__all__ = ["OutgoingCensus", "OutgoingReconciler"]

log = structlog.get_logger(__name__)


@dataclass(slots=True)
class OutgoingCensus:
    """What the scan saw of one user's outgoing side."""

    n: int | None = None
    """``n`` of the user's ``O`` item (None: no item or no ``n``, which counts as 0)."""
    follows: int = 0
    """``E#`` items in the user's ``following`` partition."""
    requested: list[int] = field(default_factory=list)
    """The accounts whose ``followers`` partition held a pending request of the user."""

    @property
    def drifted(self) -> bool:
        return (self.n or 0) != self.follows + len(self.requested)


class OutgoingReconciler:
    def __init__(
        self,
        dynamo: AsyncDynamo,
        tables: TableNames,
        counter: EdgeCounter,
        *,
        fix: bool,
        rounds: int = 3,
        log_findings: bool = True,
    ) -> None:
        """``log_findings``: log each finding as ``reconcile_drift`` (``fsck`` logs its own lines)."""
        self._log_findings = log_findings
        self._dynamo = dynamo
        self._followers = tables.table(FOLLOWERS)
        self._following = tables.table(FOLLOWING)
        self._counter = counter
        self._fix = fix
        self._rounds = rounds

    async def read_n(self, user_id: int) -> int | None:
        response = await self._dynamo.call(
            "get_item",
            TableName=self._following,
            Key=it.outgoing_key(user_id),
            ConsistentRead=True,
            ProjectionExpression="#n",
            ExpressionAttributeNames={"#n": "n"},
        )
        found = response.get("Item", {}).get("n")
        return int(found["N"]) if found else None

    async def pending_requests(self, user_id: int, followees: list[int]) -> frozenset[int]:
        """Which of ``followees`` still hold the user's pending request (strongly consistent)."""
        if not followees:
            return frozenset()
        keys = [it.key(it.REQUEST, followee, user_id) for followee in followees]
        found = await batch_get_all(self._dynamo, self._followers, keys, consistent=True, projection="pk")
        return frozenset(int(i["pk"]["N"]) for i in found)

    async def write_n(self, user_id: int, value: int, *, read: int | None) -> bool:
        """Set ``n`` only if it still holds ``read`` (or is still absent)."""
        element: Item = {
            "TableName": self._following,
            "Key": it.outgoing_key(user_id),
            "UpdateExpression": "SET #n = :new",
            "ExpressionAttributeNames": {"#n": "n"},
            "ExpressionAttributeValues": {":new": {"N": str(value)}},
        }
        if read is None:
            element["ConditionExpression"] = "attribute_not_exists(#n)"
        else:
            element["ConditionExpression"] = "#n = :read"
            element["ExpressionAttributeValues"][":read"] = {"N": str(read)}
        return await transact_once(self._dynamo, [{"Update": element}]) is None

    async def recheck(self, user_id: int, census: OutgoingCensus) -> OutgoingFinding:
        """Confirm (and with ``fix`` correct) a drift the census saw."""
        finding = OutgoingFinding(user_id, Outcome.BUSY, census.n, census.follows, len(census.requested))
        for _ in range(self._rounds):
            read = await self.read_n(user_id)
            if read != census.n:  # A's total moved since the census: requests may be missing from it
                break
            before = await self.pending_requests(user_id, census.requested)
            follows = await self._counter.following(user_id)
            after = await self.pending_requests(user_id, census.requested)
            finding = OutgoingFinding(user_id, Outcome.BUSY, read, follows, len(after))
            if before != after:  # an accept (or a withdrawal) between the reads: look again
                continue
            if finding.true == (read or 0):
                return OutgoingFinding(user_id, Outcome.CLEAN, read, follows, len(after))
            if not self._fix:
                return self._report(OutgoingFinding(user_id, Outcome.DRIFT, read, follows, len(after)))
            if await self.write_n(user_id, finding.true, read=read):
                return self._report(OutgoingFinding(user_id, Outcome.FIXED, read, follows, len(after)))
            break  # n moved after it was read: the census is stale for this user
        return self._report(finding)

    def _report(self, finding: OutgoingFinding) -> OutgoingFinding:
        if not self._log_findings:
            return finding
        log.info(
            "reconcile_drift",
            kind="outgoing",
            user=finding.user_id,
            outcome=finding.outcome.value,
            stored=finding.stored,
            true=finding.true,
            follows=finding.follows,
            requests=finding.requests,
        )
        return finding
