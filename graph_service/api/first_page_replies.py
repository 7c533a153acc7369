"""The replies of first pages, remembered by the page they were built from.

A near-cache hit's first page comes back as the same page object (``rules/paging.py``), and so
does its reply: building it (50 ``FollowEntry`` with timestamps) was about a third of a cached
``ListFollowers``. Replies are never changed once built; a changed list is a new page object.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from graph_service.rules.identity_memo import IdentityMemo
from graph_service.rules.paging import FIRST_PAGES_REMEMBERED, Page

__all__ = ["FirstPageReplies"]

R = TypeVar("R")


class FirstPageReplies(Generic[R]):
    def __init__(self) -> None:
        self._memo: IdentityMemo[R] = IdentityMemo(
            FIRST_PAGES_REMEMBERED
        )  # as many as the rules keep signed: each finds its reply

    def reply(self, user_id: int, page_token: str, page: Page[Any], build: Callable[[], R]) -> R:
        """``build()``, remembered for a first page (the only kind the near cache hands out again)."""
        return build() if page_token else self._memo.get(user_id, page, build)
