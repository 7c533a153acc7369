"""Users' counters against their true edge counts: observe, settle, observe again, and fix only
stable drift with the counters consumer's own guarded write (``reconcile_rules`` says why).

All users in hand go through the rounds together: one observation of each, one wait of
``settle_seconds``, a second observation of each; the stable ones are fixed (``ver = V1`` guard,
``ver`` becomes ``V1 + 1``), the moved ones and those whose write was refused go to the next round.
After the last round what is still moving is reported as busy.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Sequence

import structlog

from graph_service.domain.ports import CountCache
from graph_service.operations.concurrency import bounded
from graph_service.operations.edge_counts import EdgeCounter
from graph_service.operations.reconcile_rules import Observation, Outcome, UserFinding, Verdict, judge
from graph_service.store.counter_table import DynamoCounterTable

__all__ = ["CountsReconciler"]

log = structlog.get_logger(__name__)


class CountsReconciler:
    """Checks (and with ``fix`` corrects) users' ``followers_count``/``following_count``."""

    def __init__(
        self,
        table: DynamoCounterTable,
        counter: EdgeCounter,
        cache: CountCache | None,
        *,
        fix: bool,
        settle_seconds: float,
        rounds: int = 3,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        log_findings: bool = True,
    ) -> None:
        """``log_findings``: log each finding as ``reconcile_drift`` (``fsck``, which logs its own
        lines, turns it off)."""
        self._log_findings = log_findings
        self._table = table
        self._counter = counter
        self._cache = cache
        self._fix = fix
        self._settle = settle_seconds
        self._rounds = rounds
        self._sleep = sleep

    async def observe(self, user_ids: Sequence[int]) -> dict[int, Observation]:
        """Each user's stored counters (strongly consistent), then at once its true counts: the
        order the stability rule relies on, with as little time as possible in between."""

        async def one(user: int) -> Observation:
            stored = (await self._table.read_counts([user]))[user]
            followers, following = await self._counter.both(user)
            return Observation(stored, followers, following)

        seen = await bounded([functools.partial(one, u) for u in user_ids])
        return dict(zip(user_ids, seen, strict=True))

    async def check(self, user_ids: Sequence[int]) -> list[UserFinding]:
        """A finding for every user (CLEAN ones included), in the order given."""
        first = await self.observe(user_ids)
        findings = {u: UserFinding(u, Outcome.CLEAN, o) for u, o in first.items() if not o.drifted}
        pending = {u: o for u, o in first.items() if o.drifted}
        for _ in range(self._rounds):
            if not pending:
                break
            await self._sleep(self._settle)
            second = await self.observe(list(pending))
            moving: dict[int, Observation] = {}
            stable: list[Observation] = []
            stable_users: list[int] = []
            for user, earlier in pending.items():
                later = second[user]
                verdict = judge(earlier, later)
                if verdict is Verdict.CLEAN:
                    findings[user] = UserFinding(user, Outcome.CLEAN, later)
                elif verdict is Verdict.MOVED:
                    moving[user] = later
                elif not self._fix:
                    findings[user] = self._report(UserFinding(user, Outcome.DRIFT, later))
                else:
                    stable_users.append(user)
                    stable.append(later)
            refused = await self._fix_stable(stable_users, stable, findings)
            if refused:  # the version moved under the write: start that user's observation afresh
                for user, fresh in (await self.observe(refused)).items():
                    if fresh.drifted:
                        moving[user] = fresh
                    else:
                        findings[user] = UserFinding(user, Outcome.CLEAN, fresh)
            pending = moving
        for user, last in pending.items():
            findings[user] = self._report(UserFinding(user, Outcome.BUSY, last))
        return [findings[u] for u in user_ids]

    async def _fix_stable(
        self, users: list[int], seen: list[Observation], findings: dict[int, UserFinding]
    ) -> list[int]:
        """Write each stable user's true counts guarded by the version observed; the users whose
        write was refused."""
        writes = [
            functools.partial(self._table.write_absolute, u, o.fixed_counts, expected_version=o.stored.version)
            for u, o in zip(users, seen, strict=True)
        ]
        done = await bounded(writes)
        refused: list[int] = []
        for user, observation, written in zip(users, seen, done, strict=True):
            if not written:
                log.info("reconcile_fix_refused", user=user, version=observation.stored.version)
                refused.append(user)
                continue
            cached = await self._repair_cache(user, observation)
            findings[user] = self._report(UserFinding(user, Outcome.FIXED, observation, cache_updated=cached))
        return refused

    async def _repair_cache(self, user: int, observation: Observation) -> bool | None:
        """Give the count cache the fixed counts with their new version (its script never lets an
        older version replace a newer one). Redis down: the fix stands in DynamoDB, the cached
        counts stay as they were until the user's next counter change or their TTL."""
        if self._cache is None:
            return None
        if await self._cache.set_counts(user, observation.fixed_counts):
            return True
        log.warning("reconcile_cache_skipped", user=user, reason="redis unreachable")
        return False

    def _report(self, finding: UserFinding) -> UserFinding:
        if not self._log_findings:
            return finding
        seen = finding.seen
        log.info(
            "reconcile_drift",
            kind="counts",
            user=finding.user_id,
            outcome=finding.outcome.value,
            followers_stored=seen.stored.followers,
            followers_true=seen.followers,
            following_stored=seen.stored.following,
            following_true=seen.following,
            version=seen.stored.version,
            cache_updated=finding.cache_updated,
        )
        return finding
