"""``IdentityMemo``: a value is reused only for the very object it was built from."""

from __future__ import annotations

from graph_service.domain.models import Edge, EdgePage
from graph_service.rules.identity_memo import IdentityMemo


def test_the_same_object_gets_what_was_built_and_an_equal_one_is_built_again() -> None:
    memo: IdentityMemo[str] = IdentityMemo(10)
    page = EdgePage(entries=[Edge(1, 10)], has_more=False)
    built: list[str] = []

    def build(text: str) -> str:
        built.append(text)
        return text

    assert memo.get("u1", page, lambda: build("first")) == "first"
    assert memo.get("u1", page, lambda: build("again")) == "first"
    assert memo.get("u2", page, lambda: build("other tag")) == "other tag"  # tags keep apart
    equal = EdgePage(entries=[Edge(1, 10)], has_more=False)
    assert equal == page
    assert memo.get("u1", equal, lambda: build("equal")) == "equal"  # a new object: built anew
    assert built == ["first", "other tag", "equal"]


def test_it_is_bounded_and_holds_what_it_remembers() -> None:
    memo: IdentityMemo[int] = IdentityMemo(2)
    pages = [EdgePage(entries=[], has_more=False) for _ in range(3)]
    for i, page in enumerate(pages):
        memo.get("u", page, lambda i=i: i)  # type: ignore[misc]  # mypy cannot type the lambda's default
    assert len(memo) == 2
    assert memo.get("u", pages[0], lambda: 99) == 99  # the oldest went
    assert memo.get("u", pages[2], lambda: 99) == 2
    off: IdentityMemo[int] = IdentityMemo(0)
    off.get("u", pages[0], lambda: 1)
    assert len(off) == 0
