"""The rules of ``reconcile``: what drift is, when it is stable enough to fix, how findings read."""

from __future__ import annotations

import pytest

from graph_service.domain.models import Counts
from graph_service.operations.reconcile_census import UserCensus
from graph_service.operations.reconcile_outgoing import OutgoingCensus
from graph_service.operations.reconcile_rules import (
    Observation,
    Outcome,
    OutgoingFinding,
    UserFinding,
    Verdict,
    judge,
    outgoing_line,
    parse_user_ids,
    summary_line,
    user_line,
)


def seen(followers: int, following: int, *, stored: tuple[int, int], version: int) -> Observation:
    return Observation(Counts(stored[0], stored[1], version), followers, following)


def test_drift_is_any_difference_between_stored_and_true_counts() -> None:
    assert not seen(3, 1, stored=(3, 1), version=4).drifted
    assert seen(3, 1, stored=(4, 1), version=4).drifted
    assert seen(3, 1, stored=(3, 0), version=4).drifted
    assert seen(0, 0, stored=(0, 2), version=0).drifted


def test_the_fixed_counts_are_the_true_ones_one_version_past_the_observed() -> None:
    assert seen(3, 1, stored=(7, 0), version=4).fixed_counts == Counts(3, 1, 5)
    assert seen(2, 0, stored=(0, 0), version=0).fixed_counts == Counts(2, 0, 1)


def test_drift_with_the_same_version_and_the_same_truth_is_stable() -> None:
    first = seen(3, 1, stored=(7, 1), version=4)
    assert judge(first, seen(3, 1, stored=(7, 1), version=4)) is Verdict.STABLE


@pytest.mark.parametrize(
    "later",
    [
        seen(3, 1, stored=(8, 1), version=5),  # the consumer applied a record in between
        seen(4, 1, stored=(7, 1), version=4),  # a follow committed, not yet applied
        seen(3, 2, stored=(7, 1), version=4),
    ],
)
def test_drift_is_not_stable_when_the_version_or_the_true_counts_moved(later: Observation) -> None:
    assert judge(seen(3, 1, stored=(7, 1), version=4), later) is Verdict.MOVED


def test_a_later_observation_without_drift_is_clean_whatever_moved() -> None:
    assert judge(seen(3, 1, stored=(7, 1), version=4), seen(4, 1, stored=(4, 1), version=6)) is Verdict.CLEAN


def test_drift_left_or_unconfirmed_is_unresolved_clean_and_fixed_are_not() -> None:
    assert {o for o in Outcome if o.unresolved} == {Outcome.DRIFT, Outcome.BUSY}


def test_a_drifted_user_reads_as_one_line_with_stored_and_true_counts() -> None:
    finding = UserFinding(42, Outcome.DRIFT, seen(5, 0, stored=(7, 0), version=3))
    assert user_line(finding, fixing=False) == "user 42: followers stored 7 true 5, following stored 0 true 0"
    assert user_line(finding, fixing=True) == (
        "user 42: followers stored 7 true 5, following stored 0 true 0; not fixed"
    )


def test_fixed_and_busy_users_say_so_and_a_skipped_cache_update_is_named() -> None:
    observation = seen(5, 2, stored=(7, 2), version=3)
    assert user_line(UserFinding(9, Outcome.FIXED, observation, cache_updated=True), fixing=True) == (
        "user 9: followers stored 7 true 5, following stored 2 true 2; fixed"
    )
    assert user_line(UserFinding(9, Outcome.FIXED, observation, cache_updated=False), fixing=True) == (
        "user 9: followers stored 7 true 5, following stored 2 true 2; fixed"
        " (count cache not updated: Redis unreachable)"
    )
    assert user_line(UserFinding(9, Outcome.BUSY, observation), fixing=True).endswith(
        "; busy (kept changing), not fixed"
    )
    assert user_line(UserFinding(9, Outcome.BUSY, observation), fixing=False).endswith(
        "; busy (kept changing), unconfirmed"
    )


def test_an_outgoing_count_reads_with_its_follows_and_requests() -> None:
    assert outgoing_line(OutgoingFinding(42, Outcome.FIXED, 3, 4, 1), fixing=True) == (
        "outgoing 42: stored 3 true 5 (follows 4 + requests 1); fixed"
    )
    assert outgoing_line(OutgoingFinding(7, Outcome.DRIFT, None, 2, 0), fixing=False) == (
        "outgoing 7: stored none true 2 (follows 2 + requests 0)"
    )


def test_the_summary_counts_checked_drifted_fixed_and_busy() -> None:
    observation = seen(1, 1, stored=(2, 1), version=1)
    users = [UserFinding(1, Outcome.FIXED, observation), UserFinding(2, Outcome.BUSY, observation)]
    assert summary_line(users, 3, None, 0, 4.25) == "reconcile: 3 users checked, 2 drifted, 1 fixed, 1 busy; 4.2 s"
    outgoing = [OutgoingFinding(5, Outcome.DRIFT, 1, 2, 0)]
    assert summary_line([], 10, outgoing, 6, 1.0) == (
        "reconcile: 10 users checked, 0 drifted, 0 fixed, 0 busy;"
        " outgoing counts: 6 users checked, 1 drifted, 0 fixed, 0 busy; 1.0 s"
    )


def test_user_ids_are_parsed_in_order_without_repeats() -> None:
    assert parse_user_ids(["5", "3", "5", " 18446744073709551615"]) == [5, 3, 2**64 - 1]
    assert parse_user_ids([]) == []


@pytest.mark.parametrize("bad", ["0", "-3", "abc", "1.5", "", "18446744073709551616", "0x10"])
def test_anything_but_a_user_id_is_refused_by_name(bad: str) -> None:
    with pytest.raises(ValueError, match="not a user ID") as refused:
        parse_user_ids(["7", bad])
    assert repr(bad) in str(refused.value)


def test_the_census_sees_drift_in_either_count() -> None:
    assert not UserCensus(Counts(2, 1, 5), followers=2, outgoing=OutgoingCensus(follows=1)).counts_drifted
    assert UserCensus(Counts(2, 1, 5), followers=3, outgoing=OutgoingCensus(follows=1)).counts_drifted
    assert UserCensus(Counts(0, 0, 0), followers=0, outgoing=OutgoingCensus(follows=1)).counts_drifted


def test_an_outgoing_count_drifts_unless_it_equals_follows_plus_requests() -> None:
    assert not OutgoingCensus(n=3, follows=2, requested=[9]).drifted
    assert not OutgoingCensus(n=None, follows=0).drifted  # no n yet counts as 0
    assert OutgoingCensus(n=None, follows=2).drifted  # follows made before n existed
    assert OutgoingCensus(n=-1, follows=0).drifted  # legacy follows removed through the service
