"""Packing rows into transactions: at most 100 elements, one outgoing count per follower, distinct pairs."""

from __future__ import annotations

from collections import Counter
from typing import Any

from graph_service.operations.import_batches import Settled, Unit, classify, pack, transaction
from graph_service.operations.import_rows import Reason, Reject, Row

FAILED = "ConditionalCheckFailed"


def row(line: int, follower: int, followee: int) -> Row:
    return Row(line, follower, followee, 1_000 + line, f"{follower},{followee}")


def units_of(rows: list[Row]) -> list[Unit]:
    return list(pack((r.line, r) for r in rows))


def item_identity(element: dict[str, Any]) -> tuple[str, str, str]:
    (body,) = element.values()
    key = body.get("Key") or {"pk": body["Item"]["pk"], "sk": body["Item"]["sk"]}
    return body["TableName"], key["pk"]["N"], key["sk"]["S"]


def test_one_follower_fills_a_batch_with_14_rows_and_one_count_update() -> None:
    """7 elements a row plus one count: 14 rows make 99 elements, a 15th would make 106."""
    units = units_of([row(n, 1, 100 + n) for n in range(1, 31)])
    assert [len(u.rows) for u in units] == [14, 14, 2]
    elements, where = transaction(units[0].rows, "fr", "fg", cap=7500)
    assert len(elements) == 99
    assert where == {1: 98}
    update = elements[98]["Update"]
    assert update["ExpressionAttributeValues"] == {":delta": {"N": "14"}, ":most": {"N": str(7500 - 14)}}


def test_distinct_followers_fit_12_rows_a_batch() -> None:
    units = units_of([row(n, n, 10_000 + n) for n in range(1, 30)])
    assert [len(u.rows) for u in units] == [12, 12, 5]
    assert all(len(transaction(u.rows, "fr", "fg", cap=0)[0]) <= 100 for u in units)


def test_no_batch_holds_an_item_twice_even_with_reverse_pairs() -> None:
    """(a, b) then (b, a) check the same block items: the reverse pair starts a new batch."""
    rows = [row(1, 1, 2), row(2, 3, 4), row(3, 2, 1), row(4, 5, 6)]
    units = units_of(rows)
    assert [[r.line for r in u.rows] for u in units] == [[1, 2], [3, 4]]
    for unit in units:
        elements, _ = transaction(unit.rows, "fr", "fg", cap=10)
        identities = [item_identity(e) for e in elements]
        assert len(identities) == len(set(identities))


def test_units_are_contiguous_line_ranges_holding_the_rejects_read_between() -> None:
    bad = Reject(3, Reason.SELF_FOLLOW, "", "4,4")
    parsed: list[tuple[int, Row | Reject | None]] = [(n, row(n, 1, 100 + n)) for n in (1, 2)]
    parsed += [(3, bad), (4, None)]
    parsed += [(n, row(n, 1, 100 + n)) for n in range(5, 20)]
    parsed += [(20, None)]
    units = list(pack(parsed))
    assert [(u.first_line, u.last_line) for u in units] == [(1, 16), (17, 20)]
    assert units[0].rejects == [bad]
    assert [r.line for r in units[0].rows] == [1, 2, *range(5, 17)]


def test_a_file_of_rejects_only_is_one_unit_without_rows() -> None:
    bad = Reject(1, Reason.MALFORMED, "", "x")
    assert list(pack([(1, bad), (2, None)])) == [Unit(1, 2, [], [bad])]


def test_no_cap_means_no_condition_and_counts_are_summed_per_follower() -> None:
    rows = [row(1, 1, 2), row(2, 3, 2), row(3, 1, 4)]
    elements, where = transaction(rows, "fr", "fg", cap=0)
    assert where == {1: 21, 3: 22}
    assert "ConditionExpression" not in elements[21]["Update"]
    assert Counter(e["Update"]["ExpressionAttributeValues"][":delta"]["N"] for e in elements[21:]) == {"2": 1, "1": 1}


def test_cancellation_codes_say_what_became_of_each_row() -> None:
    """Row 0's edge exists, row 1 is blocked (either way), row 2 has a pending request, row 3 passed."""
    fine = ["None"] * 7
    codes = (
        [FAILED, "None", FAILED, "None", "None", "None", "None"]
        + ["None"] * 6
        + [FAILED]
        + ["None", "None", "None", "None", FAILED, "None", "None"]
        + fine
    )
    assert [classify(codes, i) for i in range(4)] == [
        Settled.PRESENT,
        Reason.BLOCKED,
        Reason.REQUEST_PENDING,
        None,
    ]
