"""What ``fsck`` found: one line per violation (and a JSON log line), then a summary by kind.

A violation is named by its kind and the user whose partition (or cache slot) holds the offending
item, with the other account of the pair where there is one. The same violation seen twice (from
both partitions of a pair, or by two scan segments) is reported once.

A counter that kept moving through every second look (the counters consumer applying follows of a
busy account, a user following and requesting all along) is neither a violation nor silence: it is
printed as ``unconfirmed`` and counted apart in the summary, and does not fail the run (``clean``
ignores it), since a healthy live system has such users at any moment.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass
from typing import TextIO

import structlog

__all__ = ["CACHE_KINDS", "KINDS", "Report", "Violation"]

log = structlog.get_logger(__name__)

KINDS = {
    "edge_one_sided": "a follow in one table without its mirror in the other",
    "edge_time_mismatch": "both directions present with different `at`",
    "order_unpaired": "a T#/RT# order item without its E#/R# membership item at the same `at`, or the reverse",
    "edge_and_request": "an edge and a pending request in the same direction",
    "request_mirror_unpaired": "a pending request's R# in followers without its mirror R# in following at the same"
    " `at`, or a mirror without its request",
    "across_block": "an edge or a request between two accounts one of which blocks the other",
    "mute_unpaired": "a mute in force whose M# and MT# items are not both there with the same attributes",
    "state_malformed": "an account's state item (followers pk=U A) whose `st` is not a state's letter, or `gen`"
    " (or `done`, `total`, `at`, `prev`) does not parse",
    "archived_malformed": "an archived item (followers pk=U X#<side>#<id>) whose key, `other`, `at` or `gen` is not"
    " well formed",
    "archived_in_active": "an archived edge or request in the partition of an active account (no job running)",
    "archived_of_deleted": "an archived edge or request left in the partition of a deleted account (its job done)",
    "archived_and_live": "an archived edge or request beside a live one of the same pair and direction (no job"
    " running)",
    "live_edge_of_inactive": "a live E# or R# in either partition of a deactivated or deleted account (its job done)",
    "job_malformed": "an item of the jobs' registry (followers pk=0) that is not J#<20-digit ID> with a numeric `gen`",
    "job_stale": "a registered job (J#U) whose account is at another generation or settled, its lease expired over"
    " an hour ago",
    "counter_drift": "users' followers_count/following_count differ from the E# items",
    "outgoing_count": "following pk=A sk=O `n` differs from A's follows plus pending requests (--all)",
    "cache_follow_state": "a cached follow state (fs) that DynamoDB contradicts",
    "cache_list": "a cached whole list (fl/fg) that differs from the store's order items",
    "cache_counts": "cached counts (cnt) that differ from the users table",
    "cache_relationship": "cached relationship flags (rl) that DynamoDB contradicts",
    "cache_mute": "a cached mute (mu) that DynamoDB contradicts (an ended mute agrees with none)",
    "cache_privacy": "a cached privacy flag (pv) that DynamoDB contradicts",
    "cache_account_state": "a cached lifecycle state (st) on the other side of the graph from the stored one",
}
"""Every kind, with what it means (the README's table)."""

CACHE_KINDS = frozenset(k for k in KINDS if k.startswith("cache_"))


@dataclass(frozen=True, slots=True)
class Violation:
    kind: str
    user: int
    """The account whose partition or cache slot holds the offending item (a job's account for an item
    of the jobs' registry, whose partition is nobody's; 0 when its key names no account)."""
    other: int | None
    """The other account of the pair, if the violation concerns a pair."""
    detail: str


def _line(violation: Violation) -> str:
    """``KIND user=U [other=O]: what``, as printed."""
    other = "" if violation.other is None else f" other={violation.other}"
    return f"{violation.kind} user={violation.user}{other}: {violation.detail}"


def _fields(violation: Violation) -> dict[str, object]:
    """The violation's fields in its JSON log line."""
    return {"kind": violation.kind, "user_id": violation.user, "other_id": violation.other, "detail": violation.detail}


class Report:
    """Collects violations as they are confirmed, prints each once, and sums them up."""

    def __init__(self, out: TextIO | None = None) -> None:
        self._out = out or sys.stdout
        self._seen: set[Violation] = set()
        self.by_kind: Counter[str] = Counter()
        self.repaired = 0
        self._repaired: set[Violation] = set()
        self._unsettled: set[Violation] = set()
        self.checked: dict[str, int] = {}
        """What was checked (users, partitions, cache entries), once the summary is made."""
        self.counters_not_checked: str | None = None
        """Why users' counters were not checked (the counters consumer is behind), if they were not."""

    def skip_counters(self, why: str) -> None:
        """Counters are not checked this run, for ``why``: said at once, and again in the summary."""
        self.counters_not_checked = why
        print(f"{why}: counters not checked (run fsck again once it has caught up)", file=self._out)

    def add(self, violation: Violation, *, repaired: bool = False) -> bool:
        """Print and log ``violation`` unless it was reported already; whether it was new."""
        if violation.kind not in KINDS:
            raise ValueError(f"unknown violation kind {violation.kind}")
        if violation in self._seen:
            return False
        self._seen.add(violation)
        self.by_kind[violation.kind] += 1
        self.repaired += repaired
        if repaired:
            self._repaired.add(violation)
        done = " (repaired: entry deleted)" if repaired else ""
        print(f"{_line(violation)}{done}", file=self._out)
        log.warning("fsck_violation", **_fields(violation), repaired=repaired)
        return True

    def add_unconfirmed(self, suspicion: Violation) -> bool:
        """Print and log a suspicion that could not be confirmed (it kept changing) unless it was
        printed already; whether it was new. Not a violation."""
        if suspicion.kind not in KINDS:
            raise ValueError(f"unknown violation kind {suspicion.kind}")
        if suspicion in self._unsettled:
            return False
        self._unsettled.add(suspicion)
        print(f"unconfirmed {_line(suspicion)}", file=self._out)
        log.info("fsck_unconfirmed", **_fields(suspicion))
        return True

    @property
    def unconfirmed(self) -> list[Violation]:
        """The suspicions printed as unconfirmed (kept changing), sorted."""
        return sorted(self._unsettled, key=lambda v: (v.kind, v.user, v.other or 0, v.detail))

    @property
    def violations(self) -> list[Violation]:
        return sorted(self._seen, key=lambda v: (v.kind, v.user, v.other or 0, v.detail))

    @property
    def total(self) -> int:
        return sum(self.by_kind.values())

    @property
    def unrepaired(self) -> int:
        """Violations still in place: every store violation, and cache ones not deleted."""
        return self.total - self.repaired

    def summary(self, checked: dict[str, int]) -> None:
        """The last lines: counts by kind and what was checked."""
        self.checked = dict(checked)
        what = ", ".join(f"{n} {name.replace('_', ' ')}" for name, n in checked.items())
        unsettled = f"; {len(self._unsettled)} unconfirmed (kept changing)" if self._unsettled else ""
        if self.counters_not_checked:
            unsettled += f"; counters not checked ({self.counters_not_checked})"
        if not self.total:
            print(f"fsck: no violation{unsettled} ({what})", file=self._out)
        else:
            kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(self.by_kind.items()))
            repaired = f"; {self.repaired} repaired" if self.repaired else ""
            plural = "" if self.total == 1 else "s"
            print(f"fsck: {self.total} violation{plural} ({kinds}){repaired}{unsettled} ({what})", file=self._out)
        emit = log.warning if self.total else log.info
        emit(
            "fsck_summary",
            violations=self.total,
            repaired=self.repaired,
            unconfirmed=len(self._unsettled),
            by_kind=dict(self.by_kind),
            counters_not_checked=self.counters_not_checked,
            **checked,
        )

    def as_dict(self) -> dict[str, object]:
        """The run as one JSON object (``fsck --json``): every violation and unconfirmed suspicion, the
        counts by kind and what was checked."""
        return {
            "violations": [{**_fields(v), "repaired": v in self._repaired} for v in self.violations],
            "unconfirmed": [_fields(v) for v in self.unconfirmed],
            "total": self.total,
            "by_kind": dict(sorted(self.by_kind.items())),
            "repaired": self.repaired,
            "counters_not_checked": self.counters_not_checked,
            "checked": self.checked,
        }
