"""The rules of ``socialgraph reconcile``, apart from any I/O: what drift is, when it may be fixed,
and how a finding reads.

The counters consumer applies stream records as deltas (read ``(counts, ver)``, add, write on
``ver = old``). A record committed to the edge tables but not yet applied is already in a
``Select=COUNT`` of the edges, so writing that count and then letting the consumer add the record
would count it twice. A user's drift may therefore be fixed only when it is *stable*: two
observations ``--settle-seconds`` apart (longer than the consumer's lag) with the same counter
version and the same true counts. Then every record the count includes was applied before the
first observation (a later application would have moved the version), and records committed
after the count are applied on top of the fixed value, as they should be.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from graph_service.domain.ids import is_id
from graph_service.domain.models import Counts

__all__ = [
    "Observation",
    "Outcome",
    "OutgoingFinding",
    "UserFinding",
    "Verdict",
    "judge",
    "outgoing_line",
    "parse_user_ids",
    "summary_line",
    "tally",
    "user_line",
]


@dataclass(frozen=True, slots=True)
class Observation:
    """One user's stored counters (read first) and true counts (counted after)."""

    stored: Counts
    followers: int
    following: int

    @property
    def drifted(self) -> bool:
        return (self.stored.followers, self.stored.following) != (self.followers, self.following)

    @property
    def fixed_counts(self) -> Counts:
        """The true counts, as the guarded write stores them: one version past the one observed."""
        return Counts(followers=self.followers, following=self.following, version=self.stored.version + 1)


class Verdict(Enum):
    CLEAN = "clean"
    """No drift in the later observation."""
    STABLE = "stable"
    """Drift, and neither the version nor the true counts moved between the observations."""
    MOVED = "moved"
    """Drift, but something moved: the consumer may be applying records the count already has."""


def judge(first: Observation, second: Observation) -> Verdict:
    """Compare two observations of one user, ``--settle-seconds`` apart (``second`` the later)."""
    if not second.drifted:
        return Verdict.CLEAN
    same_version = second.stored.version == first.stored.version
    same_truth = (second.followers, second.following) == (first.followers, first.following)
    return Verdict.STABLE if same_version and same_truth else Verdict.MOVED


class Outcome(Enum):
    CLEAN = "clean"
    DRIFT = "drift"
    """Stable drift, left as it is (no ``--fix``)."""
    FIXED = "fixed"
    BUSY = "busy"
    """Drift seen, but the user's counts kept moving for every round: neither confirmed nor fixed."""

    @property
    def unresolved(self) -> bool:
        return self in (Outcome.DRIFT, Outcome.BUSY)


@dataclass(frozen=True, slots=True)
class UserFinding:
    user_id: int
    outcome: Outcome
    seen: Observation
    """The last observation (for FIXED: the one whose true counts were written)."""
    cache_updated: bool | None = None
    """For FIXED: whether the count cache took the fixed counts (None: no cache configured)."""


@dataclass(frozen=True, slots=True)
class OutgoingFinding:
    """The following cap's count ``n`` of a user against its follows plus pending requests."""

    user_id: int
    outcome: Outcome
    stored: int | None
    """``n`` as read (None: the user has no ``n`` yet, which counts as 0)."""
    follows: int
    requests: int

    @property
    def true(self) -> int:
        return self.follows + self.requests


def _status(outcome: Outcome, fixing: bool) -> str:
    if outcome is Outcome.FIXED:
        return "; fixed"
    if outcome is Outcome.BUSY:
        return "; busy (kept changing), not fixed" if fixing else "; busy (kept changing), unconfirmed"
    return "; not fixed" if fixing else ""


def user_line(finding: UserFinding, *, fixing: bool) -> str:
    """``user 42: followers stored 7 true 5, following stored 0 true 0; fixed``."""
    seen = finding.seen
    line = (
        f"user {finding.user_id}: followers stored {seen.stored.followers} true {seen.followers},"
        f" following stored {seen.stored.following} true {seen.following}{_status(finding.outcome, fixing)}"
    )
    if finding.outcome is Outcome.FIXED and finding.cache_updated is False:
        line += " (count cache not updated: Redis unreachable)"
    return line


def outgoing_line(finding: OutgoingFinding, *, fixing: bool) -> str:
    """``outgoing 42: stored 3 true 5 (follows 4 + requests 1); fixed``."""
    stored = "none" if finding.stored is None else str(finding.stored)
    return (
        f"outgoing {finding.user_id}: stored {stored} true {finding.true}"
        f" (follows {finding.follows} + requests {finding.requests}){_status(finding.outcome, fixing)}"
    )


def tally(findings: list[UserFinding] | list[OutgoingFinding], checked: int) -> dict[str, int]:
    """Users checked, and of those found, how many drifted (whatever became of them), were fixed or busy."""
    return {
        "checked": checked,
        "drifted": sum(f.outcome is not Outcome.CLEAN for f in findings),
        "fixed": sum(f.outcome is Outcome.FIXED for f in findings),
        "busy": sum(f.outcome is Outcome.BUSY for f in findings),
    }


def summary_line(
    users: list[UserFinding],
    users_checked: int,
    outgoing: list[OutgoingFinding] | None,
    outgoing_checked: int,
    elapsed_seconds: float,
) -> str:
    """``reconcile: 3 users checked, 2 drifted, 1 fixed, 1 busy; 4.2 s`` (plus the outgoing counts
    after ``--all``)."""

    def part(findings: list[UserFinding] | list[OutgoingFinding], checked: int, noun: str) -> str:
        counts = tally(findings, checked)
        return f"{checked} {noun} checked, {counts['drifted']} drifted, {counts['fixed']} fixed, {counts['busy']} busy"

    parts = [part(users, users_checked, "users")]
    if outgoing is not None:
        parts.append("outgoing counts: " + part(outgoing, outgoing_checked, "users"))
    return f"reconcile: {'; '.join(parts)}; {elapsed_seconds:.1f} s"


def parse_user_ids(values: list[str]) -> list[int]:
    """The command line's USER_IDs, distinct, in the order given; ``ValueError`` naming the first
    one that is not a user ID (an integer from 1 to 2**64 - 1)."""
    found: dict[int, None] = {}
    for value in values:
        try:
            number = int(value.strip(), 10)
        except ValueError:
            number = 0
        if not is_id(number):
            raise ValueError(f"not a user ID: {value!r} (an integer from 1 to 2**64-1)")
        found.setdefault(number)
    return list(found)
