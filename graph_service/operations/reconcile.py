"""``socialgraph reconcile``: users' counters (and, with ``--all``, the following cap's count)
against the edge tables, reported per drifted user, and with ``--fix`` corrected without racing
the counters consumer.

- Given users: each one's counters against ``Select=COUNT`` queries (``reconcile_counts``).
- ``--all``: a census of every user (``reconcile_census``), then the same check of each user the
  census shows as drifted (the scan is not a snapshot), and the outgoing check of each user whose
  ``n`` disagrees with the census (``reconcile_outgoing``).

Either way the counters consumer is looked at first (``consumer_lag``): while it is behind, the
counters trail the edges for reasons no fix should touch, so nothing is checked and the report
says how far behind it is.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import structlog

from graph_service.domain.ports import CountCache
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import TableNames
from graph_service.operations.concurrency import bounded
from graph_service.operations.consumer_lag import Behind, CountersStream, counters_behind
from graph_service.operations.edge_counts import EdgeCounter
from graph_service.operations.progress import meter
from graph_service.operations.reconcile_census import CENSUS_TABLES, take_census
from graph_service.operations.reconcile_counts import CountsReconciler
from graph_service.operations.reconcile_outgoing import OutgoingReconciler
from graph_service.operations.reconcile_rules import (
    Outcome,
    OutgoingFinding,
    UserFinding,
    outgoing_line,
    summary_line,
    tally,
    user_line,
)
from graph_service.operations.scanning import total_items
from graph_service.store.counter_table import DynamoCounterTable

__all__ = ["Reconciler", "Report"]

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Report:
    users: list[UserFinding]
    """Every user found drifted (whatever became of it), by user ID."""
    users_checked: int
    outgoing: list[OutgoingFinding] | None
    """Every outgoing count found drifted, by user ID; None when not checked (no ``--all``)."""
    outgoing_checked: int
    elapsed_seconds: float
    fixing: bool
    behind: Behind | None = None
    """The counters consumer was this far behind: nothing was checked."""

    @property
    def unresolved(self) -> bool:
        """Drift left behind: found without ``--fix``, or too busy to confirm or fix."""
        outgoing = self.outgoing or []
        return any(f.outcome.unresolved for f in self.users) or any(f.outcome.unresolved for f in outgoing)

    def lines(self) -> list[str]:
        """One line per drifted user (and outgoing count), then the summary."""
        if self.behind is not None:
            return [f"reconcile: {self.behind.line()}; counts not checked (run it again once it has caught up)"]
        found = [user_line(f, fixing=self.fixing) for f in self.users]
        found += [outgoing_line(f, fixing=self.fixing) for f in self.outgoing or []]
        return [*found, self.summary()]

    def summary(self) -> str:
        return summary_line(self.users, self.users_checked, self.outgoing, self.outgoing_checked, self.elapsed_seconds)

    def as_dict(self) -> dict[str, object]:
        """The report as one JSON object (``reconcile --json``): the summary's counts and every
        drifted user; ``outgoing`` is null without ``--all``, ``behind_seconds`` null unless the
        counters consumer was behind (and nothing was checked)."""
        users = [
            {
                "user_id": f.user_id,
                "outcome": f.outcome.value,
                "followers_stored": f.seen.stored.followers,
                "followers_true": f.seen.followers,
                "following_stored": f.seen.stored.following,
                "following_true": f.seen.following,
                "cache_updated": f.cache_updated,
            }
            for f in self.users
        ]
        outgoing = None
        if self.outgoing is not None:
            found = [
                {
                    "user_id": f.user_id,
                    "outcome": f.outcome.value,
                    "stored": f.stored,
                    "true": f.true,
                    "follows": f.follows,
                    "requests": f.requests,
                }
                for f in self.outgoing
            ]
            outgoing = {**tally(self.outgoing, self.outgoing_checked), "drifted_users": found}
        return {
            "users": {**tally(self.users, self.users_checked), "drifted_users": users},
            "outgoing": outgoing,
            "fixing": self.fixing,
            "behind_seconds": None if self.behind is None else round(self.behind.seconds, 1),
            "elapsed_seconds": round(self.elapsed_seconds, 3),
        }


def _drifted(findings: Sequence[UserFinding]) -> list[UserFinding]:
    return sorted((f for f in findings if f.outcome is not Outcome.CLEAN), key=lambda f: f.user_id)


class Reconciler:
    def __init__(
        self,
        dynamo: AsyncDynamo,
        tables: TableNames,
        cache: CountCache | None,
        *,
        counters: CountersStream,
        fix: bool,
        settle_seconds: float,
        rounds: int = 3,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._dynamo = dynamo
        self._tables = tables
        self._counters = counters
        self._fix = fix
        self._settle = settle_seconds
        counter = EdgeCounter(dynamo, tables)
        self._counts = CountsReconciler(
            DynamoCounterTable(dynamo, tables), counter, cache, fix=fix, settle_seconds=settle_seconds,
            rounds=rounds, sleep=sleep,
        )  # fmt: skip
        self._outgoing = OutgoingReconciler(dynamo, tables, counter, fix=fix, rounds=rounds)

    async def _behind(self, started: float) -> Report | None:
        """The report of a run that checks nothing because the counters consumer is behind."""
        behind = await counters_behind(self._dynamo, self._tables, self._counters, settle_seconds=self._settle)
        if behind is None:
            return None
        return Report([], 0, None, 0, time.monotonic() - started, self._fix, behind=behind)

    async def users(self, user_ids: Sequence[int]) -> Report:
        started = time.monotonic()
        if (not_now := await self._behind(started)) is not None:
            return not_now
        findings = await self._counts.check(list(user_ids))
        return self._finish(Report(_drifted(findings), len(user_ids), None, 0, time.monotonic() - started, self._fix))

    async def everyone(self, *, segments: int) -> Report:
        started = time.monotonic()
        if (not_now := await self._behind(started)) is not None:
            return not_now
        total = await total_items(self._dynamo, self._tables, CENSUS_TABLES)
        with meter("reconcile", total, estimated=True) as progress:  # the item counts lag the writes
            census = await take_census(self._dynamo, self._tables, segments=segments, meter=progress)
        suspects = sorted(u for u, seen in census.items() if seen.counts_drifted)
        outgoing = sorted(u for u, seen in census.items() if seen.has_outgoing and seen.outgoing.drifted)
        log.info("reconcile_census", users=len(census), suspects=len(suspects), outgoing_suspects=len(outgoing))
        findings = _drifted(await self._counts.check(suspects))
        rechecks = [functools.partial(self._outgoing.recheck, u, census[u].outgoing) for u in outgoing]
        outgoing_findings = [f for f in await bounded(rechecks) if f.outcome is not Outcome.CLEAN]
        checked_outgoing = sum(seen.has_outgoing for seen in census.values())
        elapsed = time.monotonic() - started
        return self._finish(Report(findings, len(census), outgoing_findings, checked_outgoing, elapsed, self._fix))

    @staticmethod
    def _finish(report: Report) -> Report:
        def tally(findings: Sequence[UserFinding] | Sequence[OutgoingFinding]) -> dict[str, int]:
            """``drifted`` as the printed summary counts it (every finding), then by outcome:
            ``drift`` left as it is, ``fixed``, ``busy``."""
            by_outcome = {o.value: sum(f.outcome is o for f in findings) for o in Outcome if o is not Outcome.CLEAN}
            return {"drifted": len(findings), **by_outcome}

        log.info(
            "reconcile_summary",
            users_checked=report.users_checked,
            users=tally(report.users),
            outgoing_checked=report.outgoing_checked if report.outgoing is not None else None,
            outgoing=tally(report.outgoing) if report.outgoing is not None else None,
            elapsed_seconds=round(report.elapsed_seconds, 2),
            fixing=report.fixing,
        )
        return report
