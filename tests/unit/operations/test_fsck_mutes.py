"""The mute invariant on views of a muter's items: each break from its smallest example, ended mutes
left to TTL, and nothing from what was not read."""

from __future__ import annotations

from typing import Any

from graph_service.domain.models import Edge, Mute
from graph_service.operations.fsck_mutes import MuteView, evaluate_mute, member_sk, mute_items, order_sk
from graph_service.operations.fsck_report import KINDS, Violation
from graph_service.store import items as it

X, Y = 7, 9  # X mutes Y
T = 1_764_000_000_000_000
NOW = T + 1_000


def whole(mute: Mute) -> dict[str, Mute]:
    return {member_sk(mute.user_id): mute, order_sk(mute): mute}


def details(found: dict[str, Mute], *, now: int = NOW, looked: frozenset[str] | None = None) -> list[str]:
    violations = evaluate_mute(MuteView(X, Y, found, looked=looked), now)
    assert all((v.kind, v.user, v.other) == ("mute_unpaired", X, Y) for v in violations)
    return [v.detail for v in violations]


def test_the_kind_is_known_to_the_report() -> None:
    assert "mute_unpaired" in KINDS


def test_whole_mutes_in_force_or_ended_are_clean() -> None:
    for mute in (Mute(Y, T, 0, False), Mute(Y, T, NOW + 1, True), Mute(Y, T, NOW, True)):
        assert details(whole(mute)) == []


def test_a_membership_item_in_force_needs_its_order_item() -> None:
    mute = Mute(Y, T, 0, True)
    assert details({member_sk(Y): mute}) == [
        f"followers pk={X} M#{Y} (at {T}, exp 0, ntf true) has no MT#",
    ]
    assert details({member_sk(Y): Mute(Y, T, NOW, True)}) == []  # ended: TTL took its MT# first


def test_an_order_item_in_force_needs_its_membership_item() -> None:
    mute = Mute(Y, T, NOW + 5, False)
    assert details({order_sk(mute): mute}) == [
        f"followers pk={X} MT#{T}#{Y} (at {T}, exp {NOW + 5}, ntf false) has no M#{Y}",
    ]
    ended = Mute(Y, T, NOW - 5, False)
    assert details({order_sk(ended): ended}) == []


def test_both_items_must_hold_the_same_mute() -> None:
    mute = Mute(Y, T, 0, True)
    for other in (Mute(Y, T, 0, False), Mute(Y, T, NOW + 9, True)):
        found = {member_sk(Y): mute, order_sk(mute): other}
        assert details(found) == [f"followers pk={X} M#{Y} (at {T}, exp 0, ntf true), its MT#: {_text(other)}"]


def test_a_second_order_item_in_force_is_one_too_many() -> None:
    """A replace that left its old ``MT#`` behind: the mute is listed twice."""
    mute, old = Mute(Y, T + 5, 0, False), Mute(Y, T, 0, False)
    found = {**whole(mute), order_sk(old): old}
    assert details(found) == [f"followers pk={X} MT#{T}#{Y} ({_text(old)}) has no M#{Y} alike ({_text(mute)})"]
    assert details({**whole(mute), order_sk(old): Mute(Y, T, NOW, False)}) == []  # ended: not listed


def test_what_was_not_read_is_never_taken_for_missing() -> None:
    mute = Mute(Y, T, 0, False)
    assert details({member_sk(Y): mute}, looked=frozenset({member_sk(Y)})) == []
    assert details({order_sk(mute): mute}, looked=frozenset({order_sk(mute)})) == []
    assert details({member_sk(Y): mute}, looked=frozenset({member_sk(Y), order_sk(mute)})) != []


def test_a_partitions_mute_items_are_grouped_by_the_muted_account() -> None:
    a, b = Mute(Y, T, 0, True), Mute(11, T + 1, NOW, False)
    items: list[dict[str, Any]] = [
        it.mute_item(it.key(it.MUTE, X, Y), a),
        it.mute_item(it.order_key(it.MUTE_ORDER, X, a), a),
        it.mute_item(it.order_key(it.MUTE_ORDER, X, b), b),
        {**it.key(it.MUTE, X, 12), "at": {"N": "5"}},  # lost its other attributes: still judged
        it.item(it.key(it.EDGE, X, Y), Edge(Y, T)),
        it.item(it.key(it.BLOCK, X, Y), Edge(Y, T)),
        it.item(it.order_key(it.REQUEST_ORDER, X, Edge(Y, T)), Edge(Y, T)),
        {**it.settings_key(X), "private": {"BOOL": True}},
        {"pk": {"N": str(X)}, "sk": {"S": "M#junk"}},
    ]
    assert mute_items(items) == {
        Y: whole(a),
        11: {order_sk(b): b},
        12: {member_sk(12): Mute(12, 5, 0, False)},
    }
    violations = evaluate_mute(MuteView(X, 12, mute_items(items)[12]), NOW)
    assert violations == [
        Violation("mute_unpaired", X, 12, f"followers pk={X} M#12 (at 5, exp 0, ntf false) has no MT#")
    ]


def _text(mute: Mute) -> str:
    return f"at {mute.at_us}, exp {mute.expires_us}, ntf {str(mute.notifications).lower()}"
