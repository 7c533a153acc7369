"""The account lifecycle's invariants on items read of one account: each kind from its smallest example,
malformed items named, and nothing judged while a job runs."""

from __future__ import annotations

from typing import Any

import pytest

from graph_service.domain.accounts import Archived, JobEntry, Lifecycle, Side
from graph_service.dynamodb.tables import FOLLOWERS, FOLLOWING
from graph_service.operations.fsck_accounts import (
    STALE_AFTER_MS,
    AccountView,
    archived_key,
    evaluate_account,
    evaluate_job,
    job_user,
    live_key,
    read_archived,
    read_job,
    read_state,
    suspect_keys,
)
from graph_service.operations.fsck_pairs import member_key
from graph_service.operations.fsck_report import KINDS, Violation
from graph_service.store import account_items as ai
from graph_service.store import items as it

U, V = 7, 9  # the account and the other one of an edge or request
T = 1_764_000_000_000_000
NOW_MS = 1_764_000_000_000
NEW_KINDS = {
    "request_mirror_unpaired",
    "state_malformed",
    "archived_malformed",
    "archived_in_active",
    "archived_of_deleted",
    "archived_and_live",
    "live_edge_of_inactive",
    "job_malformed",
    "job_stale",
}


def state(st: str = "D", gen: int = 2, **more: Any) -> dict[str, Any]:
    return {**ai.state_key(U), "st": {"S": st}, "gen": {"N": str(gen)}, **more}


def archived(side: Side = Side.FOLLOWER, other: int = V, at: int = T) -> Archived:
    return Archived(U, side, other, at)


def kinds(view: AccountView) -> set[tuple[str, int, int | None]]:
    return {(v.kind, v.user, v.other) for v in evaluate_account(view)}


def test_the_kinds_are_known_to_the_report() -> None:
    assert set(KINDS) >= NEW_KINDS


def test_a_state_item_is_well_formed_or_says_what_is_not() -> None:
    assert read_state(state()) is Lifecycle.DEACTIVATED
    assert read_state(state("a", 4, done={"N": "3"}, total={"N": "5"}, at={"N": str(T)}, prev={"S": "r"})) is (
        Lifecycle.ACTIVE
    )
    for broken, problem in (
        (state("Z"), "`st` is not a state's letter"),
        ({**ai.state_key(U), "st": {"S": "D"}}, "no `gen`"),
        (state(gen=1) | {"gen": {"S": "1"}}, "`gen` is not a number"),
        (state(done={"N": "1.5"}), "`done` is not an integer: 1.5"),
        (state(prev={"S": "?"}), "`prev` is not a state's letter"),
    ):
        with pytest.raises(ValueError, match=problem):
            read_state(broken)


def test_an_archived_item_is_well_formed_or_says_what_is_not() -> None:
    item = ai.archive_item(archived(Side.REQUESTED), 3)
    assert read_archived(item) == archived(Side.REQUESTED)
    key = item["sk"]["S"]
    for broken, problem in (
        ({**item, "sk": {"S": key.replace("#Q#", "#Z#")}}, "the key is not X#<F|G|R|Q>#<20-digit ID>"),
        ({**item, "sk": {"S": f"X#F#{V}"}}, "the key is not"),
        ({**item, "sk": {"S": f"X#F#{0:020d}"}, "other": {"N": "0"}}, "the key names no account: 0"),
        ({**item, "other": {"N": str(V + 1)}}, f"`other` is {V + 1}, the key says {V}"),
        ({k: v for k, v in item.items() if k != "at"}, "no `at`"),
        ({**item, "gen": {"S": "3"}}, "`gen` is not a number"),
    ):
        with pytest.raises(ValueError, match=problem):
            read_archived(broken)


def test_a_registered_job_is_well_formed_or_says_what_is_not() -> None:
    item = {**ai.job_key(U), "gen": {"N": "2"}, "owner": {"S": "w1"}, "until": {"N": "5"}}
    assert read_job(item) == JobEntry(U, 2, "w1", 5)
    assert read_job({**ai.job_key(U), "gen": {"N": "2"}}) == JobEntry(U, 2, "", 0)
    for broken, problem in (
        ({**item, "sk": {"S": f"J#{U}"}}, "the key is not J#<20-digit ID>"),
        ({**item, "sk": {"S": "A"}}, "the key is not"),
        ({**item, "sk": {"S": f"J#{0:020d}"}}, "the key names no account: 0"),
        ({k: v for k, v in item.items() if k != "gen"}, "no `gen`"),
        ({**item, "until": {"S": "soon"}}, "`until` is not a number"),
        ({**item, "owner": {"N": "1"}}, "`owner` is not a string"),
    ):
        with pytest.raises(ValueError, match=problem):
            read_job(broken)
    assert job_user(f"J#{U:020d}") == U
    assert job_user(f"J#{U}") == U
    assert job_user("J#x") == 0
    assert job_user("Q") == 0


def test_an_archived_item_of_an_active_account_is_a_violation() -> None:
    (violation,) = evaluate_account(AccountView(U, Lifecycle.ACTIVE, (archived(),)))
    assert violation == Violation("archived_in_active", U, V, f"followers pk={U} X#F#{V} (at {T}) while active")


def test_a_deactivated_account_may_hold_its_archive_but_no_live_item_in_either_table() -> None:
    everything = tuple(archived(side, V + n) for n, side in enumerate(Side))
    assert kinds(AccountView(U, Lifecycle.DEACTIVATED, everything)) == set()
    live = {
        member_key(FOLLOWERS, U, it.EDGE, 20): T,
        member_key(FOLLOWERS, U, it.REQUEST, 21): T,
        member_key(FOLLOWING, U, it.EDGE, 22): T,
        member_key(FOLLOWING, U, it.REQUEST, 23): T,
    }
    assert kinds(AccountView(U, Lifecycle.DEACTIVATED, everything, live)) == {
        ("live_edge_of_inactive", U, other) for other in (20, 21, 22, 23)
    }
    details = [v.detail for v in evaluate_account(AccountView(U, Lifecycle.DELETED, (), live))]
    assert f"following pk={U} R#23 (at {T}) while deleted" in details


def test_a_deleted_accounts_archive_is_gone_too() -> None:
    assert kinds(AccountView(U, Lifecycle.DELETED, (archived(Side.FOLLOWING),))) == {("archived_of_deleted", U, V)}


def test_an_archived_item_beside_a_live_one_of_its_pair_and_direction() -> None:
    for side, table, prefix in (
        (Side.FOLLOWER, FOLLOWERS, it.EDGE),
        (Side.FOLLOWING, FOLLOWING, it.EDGE),
        (Side.REQUESTER, FOLLOWERS, it.REQUEST),
        (Side.REQUESTED, FOLLOWING, it.REQUEST),
    ):
        live = member_key(table, U, prefix, V)
        assert live_key(archived(side)) == live
        view = AccountView(U, Lifecycle.DEACTIVATED, (archived(side),), {live: T + 1})
        assert kinds(view) == {("archived_and_live", U, V), ("live_edge_of_inactive", U, V)}
        view = AccountView(U, Lifecycle.ACTIVE, (archived(side),), {live: T + 1})
        assert kinds(view) == {("archived_and_live", U, V), ("archived_in_active", U, V)}
    other_direction = {member_key(FOLLOWING, U, it.EDGE, V): T}  # U follows V; archived: V followed U
    assert kinds(AccountView(U, Lifecycle.ACTIVE, (archived(Side.FOLLOWER),), other_direction)) == {
        ("archived_in_active", U, V)
    }
    (both,) = [
        v
        for v in evaluate_account(
            AccountView(U, Lifecycle.ACTIVE, (archived(),), {member_key(FOLLOWERS, U, it.EDGE, V): T + 1})
        )
        if v.kind == "archived_and_live"
    ]
    assert both.detail == f"followers pk={U} X#F#{V} (at {T}) beside followers pk={U} E#{V} (at {T + 1})"


def test_nothing_is_judged_while_a_job_runs() -> None:
    live = {member_key(FOLLOWERS, U, it.EDGE, V): T}
    for running in (Lifecycle.DEACTIVATING, Lifecycle.REACTIVATING, Lifecycle.DELETING):
        view = AccountView(U, running, (archived(),), live)
        assert evaluate_account(view) == []
        assert suspect_keys(view) == []


def test_a_second_look_reads_only_the_suspects_items() -> None:
    quiet = tuple(archived(Side.FOLLOWER, other) for other in range(100, 200))
    assert suspect_keys(AccountView(U, Lifecycle.DEACTIVATED, quiet)) == []
    live = member_key(FOLLOWING, U, it.EDGE, 5)
    assert suspect_keys(AccountView(U, Lifecycle.DEACTIVATED, quiet, {live: T})) == [(live,)]
    lone = archived(Side.REQUESTED)
    assert suspect_keys(AccountView(U, Lifecycle.ACTIVE, (lone,))) == [(archived_key(lone), live_key(lone))]
    assert archived_key(lone) == (FOLLOWERS, U, f"X#Q#{V:020d}")


def job(gen: int = 2, until_ms: int = 0) -> JobEntry:
    return JobEntry(U, gen, "", until_ms)


def test_a_registered_job_of_its_accounts_running_state_is_fine_however_old() -> None:
    assert evaluate_job(job(), state("d", 2), NOW_MS) == []
    assert evaluate_job(job(), state("x", 2), NOW_MS) == []


def test_a_registered_job_that_is_not_its_accounts_is_stale_once_its_lease_ended_long_ago() -> None:
    long_ago, lately = NOW_MS - STALE_AFTER_MS - 1, NOW_MS - STALE_AFTER_MS
    for current in (state("D", 2), state("d", 3), state("a", 2), None):
        assert evaluate_job(job(until_ms=lately), current, NOW_MS) == []
        assert [v.kind for v in evaluate_job(job(until_ms=long_ago), current, NOW_MS)] == ["job_stale"]
    (violation,) = evaluate_job(job(), state("D", 2), NOW_MS)
    assert violation == Violation(
        "job_stale", U, None, f"followers pk=0 J#{U} (gen 2, lease never taken) but {U} is deactivated at gen 2"
    )
    (violation,) = evaluate_job(job(until_ms=long_ago), None, NOW_MS)
    assert violation.detail.endswith(f"lease ended at {long_ago} ms) but {U} is active at gen 0")
    assert evaluate_job(job(), state("?", 2), NOW_MS) == []  # a malformed state is reported from the account
