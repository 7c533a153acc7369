"""Reading an import file's lines: every kind of bad row, the optional header, times and duplicates."""

from __future__ import annotations

import pytest

from graph_service.operations.import_rows import Reason, Reject, Row, RowParser, count_rows, parse_time

STARTED = 1_700_000_000_000_000  # 2023-11-14T22:13:20Z, in microseconds


def parse_all(text: bytes) -> list[Row | Reject]:
    parser = RowParser(STARTED)
    found = [parser.parse(n, raw) for n, raw in enumerate(text.splitlines(keepends=True), start=1)]
    return [f for f in found if f is not None]


def reject_of(line: bytes) -> tuple[Reason, str]:
    (only,) = parse_all(line)
    assert isinstance(only, Reject), only
    return only.reason, only.detail


def test_rows_without_a_time_get_the_import_start_plus_their_line_in_microseconds() -> None:
    """Later lines are later, so the lists keep the file's order, and a resumed run stamps the same times."""
    assert parse_all(b"1,2\n\n3,4\r\n") == [Row(1, 1, 2, STARTED + 1, "1,2"), Row(3, 3, 4, STARTED + 3, "3,4")]


def test_a_header_naming_the_columns_is_skipped_and_sets_their_order() -> None:
    """Header names in any case and order; a BOM on the first line is ignored."""
    rows = parse_all(b"\xef\xbb\xbfFollowee_ID, follower_id ,followed_at\n2,1,1600000000\n")
    assert rows == [Row(2, 1, 2, 1_600_000_000_000_000, "2,1,1600000000")]


def test_a_header_is_only_the_first_non_blank_line() -> None:
    """Later, the same text is an invalid row; a first line naming other columns is one too."""
    assert [type(r) for r in parse_all(b"\nfollower_id,followee_id\n1,2\nfollower_id,followee_id\n")] == [Row, Reject]
    reason, detail = reject_of(b"from,to\n")
    assert (reason, detail) == (Reason.INVALID_ID, "follower_id 'from' is not an ID in 1..2**64-1")


@pytest.mark.parametrize(
    ("line", "reason", "detail"),
    [
        (b"1\n", Reason.MALFORMED, "expected follower_id,followee_id[,followed_at]"),
        (b"1,2,3,4\n", Reason.MALFORMED, "expected follower_id,followee_id[,followed_at]"),
        (b'1,"2\n', Reason.MALFORMED, "expected follower_id,followee_id[,followed_at]"),
        (b"1,\xff\n", Reason.MALFORMED, "not UTF-8 text"),
        (b"0,2\n", Reason.INVALID_ID, "follower_id '0' is not an ID in 1..2**64-1"),
        (b"1,-2\n", Reason.INVALID_ID, "followee_id '-2' is not an ID in 1..2**64-1"),
        (
            b"1,18446744073709551616\n",
            Reason.INVALID_ID,
            "followee_id '18446744073709551616' is not an ID in 1..2**64-1",
        ),
        (b"1_0,2\n", Reason.INVALID_ID, "follower_id '1_0' is not an ID in 1..2**64-1"),
        (b"1.5,2\n", Reason.INVALID_ID, "follower_id '1.5' is not an ID in 1..2**64-1"),
        ("\u0663,2\n".encode(), Reason.INVALID_ID, "follower_id '\u0663' is not an ID in 1..2**64-1"),
        (b"7,7\n", Reason.SELF_FOLLOW, "7 follows itself"),
        (b"1,2,yesterday\n", Reason.INVALID_TIME, "followed_at 'yesterday': not ISO-8601 or Unix seconds"),
        (b"1,2,2020-01-01T00:00:00\n", Reason.INVALID_TIME, "followed_at '2020-01-01T00:00:00': no timezone"),
        (b"1,2,-1\n", Reason.INVALID_TIME, "followed_at '-1': before 1970"),
        (b"1,2,1700000001\n", Reason.INVALID_TIME, "followed_at '1700000001': in the future"),
    ],
)
def test_every_bad_row_is_rejected_with_its_reason(line: bytes, reason: Reason, detail: str) -> None:
    assert reject_of(line) == (reason, detail)


def test_a_reject_keeps_the_raw_line_and_its_number() -> None:
    assert parse_all(b"1,2\n 9 , 9 \n")[1] == Reject(2, Reason.SELF_FOLLOW, "9 follows itself", " 9 , 9 ")


def test_a_pair_given_again_is_a_duplicate_of_its_first_line_but_the_reverse_pair_is_not() -> None:
    found = parse_all(b"1,2\n2,1\n1,2,1600000000\n")
    assert found[2] == Reject(3, Reason.DUPLICATE, "same pair as line 1", "1,2,1600000000")
    assert [type(f) for f in found] == [Row, Row, Reject]


def test_a_row_after_a_rejected_one_of_the_same_pair_is_not_a_duplicate() -> None:
    """Only a row that was read as a row holds its pair: a bad time does not."""
    found = parse_all(b"1,2,soon\n1,2\n")
    assert isinstance(found[0], Reject)
    assert found[1] == Row(2, 1, 2, STARTED + 2, "1,2")


@pytest.mark.parametrize(
    ("text", "at_us"),
    [
        ("0", 0),
        ("1600000000", 1_600_000_000_000_000),
        ("2020-09-13T12:26:40Z", 1_600_000_000_000_000),
        ("2020-09-13T14:26:40.5+02:00", 1_600_000_000_500_000),
        ("2023-11-14T22:13:20+00:00", STARTED),
    ],
)
def test_times_are_iso_8601_with_a_timezone_or_unix_seconds_up_to_the_start(text: str, at_us: int) -> None:
    assert parse_time(text, not_after_us=STARTED) == at_us


def test_an_empty_time_field_means_no_time_and_quotes_are_csv() -> None:
    assert parse_all(b'"5","6",\n') == [Row(1, 5, 6, STARTED + 1, '"5","6",')]


@pytest.mark.parametrize(
    "line",
    [b'"204" ,"205"\n', b'204, "205"\n', b" 204 , 205 \n", b'"204"\t, "205" \n', b'"204","205"\n'],
)
def test_spaces_around_a_field_are_ignored_quoted_or_not(line: bytes) -> None:
    (row,) = parse_all(line)
    assert isinstance(row, Row), row
    assert (row.follower_id, row.followee_id) == (204, 205)


def test_text_after_a_closing_quote_is_still_malformed() -> None:
    assert reject_of(b'"20"4,205\n')[0] is Reason.MALFORMED


@pytest.mark.parametrize(
    "text",
    [
        b"follower_id,followee_id\n1,2\n3,4\n",  # the header is not a row (the total once counted it)
        b"\xef\xbb\xbf \n\nFollowee_ID,follower_id\n2,1\n\n5,6\n\x1c\n",
        b"1,\xff\nfollower_id,followee_id\n1,2\n",  # a line that is not UTF-8 does not end the header's chance
        b"from,to\nfollower_id,followee_id\n1",
        b"",
    ],
)
def test_the_progress_total_counts_the_lines_that_become_rows_or_rejects(text: bytes) -> None:
    """What ``count_rows`` counts before the import is what the parser turns into rows and rejects."""
    numbered = list(enumerate(text.splitlines(keepends=True), start=1))
    assert count_rows(numbered) == len(parse_all(text))
