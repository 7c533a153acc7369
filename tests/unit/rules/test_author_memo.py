"""The per-process memos of the home-timeline read: tweet authors and reader notes are known once
remembered, bounded, the oldest (or longest unread) out first."""

from __future__ import annotations

from graph_service.rules.author_memo import AuthorMemo, ReaderMemo


def test_remembered_authors_are_known_and_others_are_not() -> None:
    memo = AuthorMemo(10)
    memo.remember({1: 100, 2: 200})
    memo.remember({})
    assert memo.known([2, 3, 1]) == {2: 200, 1: 100}
    assert memo.known([]) == {}


def test_the_memo_keeps_its_bound_and_forgets_the_first_remembered() -> None:
    memo = AuthorMemo(3)
    memo.remember({1: 10, 2: 20})
    memo.remember({3: 30, 4: 40, 5: 50})
    assert len(memo) == 3
    assert memo.known(range(1, 6)) == {3: 30, 4: 40, 5: 50}


def test_a_memo_of_size_zero_keeps_nothing() -> None:
    memo = AuthorMemo(0)
    memo.remember({1: 10})
    assert (len(memo), memo.known([1])) == (0, {})


def test_reader_notes_are_kept_per_reader_and_the_longest_unread_go_first() -> None:
    memo = ReaderMemo(2)
    memo.notes(1).authors = frozenset({5})
    memo.notes(2).celebrities = frozenset({9})
    assert memo.notes(1).authors == {5}  # read: 2 is now the longest unread
    memo.notes(3).token = (7, "t")
    assert len(memo) == 2
    assert (memo.notes(1).authors, memo.notes(3).token) == (frozenset({5}), (7, "t"))
    assert memo.notes(2).celebrities == frozenset()  # forgotten: empty notes again


def test_a_reader_memo_of_size_zero_keeps_no_notes() -> None:
    memo = ReaderMemo(0)
    memo.notes(1).authors = frozenset({5})
    assert (len(memo), memo.notes(1).authors) == (0, frozenset())
