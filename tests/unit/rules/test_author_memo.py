"""The per-process memo of tweet authors: what was remembered is known, bounded, oldest out first."""

from __future__ import annotations

from graph_service.rules.author_memo import AuthorMemo


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
