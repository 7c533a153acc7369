"""The authors of tweets this process has looked up, bounded: a tweet's author never changes, so an
entry is never stale and needs no invalidation. The home-timeline read looks up the author of every
entry it shows; remembering them saves a pipelined Redis read of 32 keys per page (about a third
of a warm page's time, measured by ``bench/home_timeline.py``)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

__all__ = ["AuthorMemo"]


class AuthorMemo:
    def __init__(self, max_entries: int) -> None:
        """Up to ``max_entries`` tweets (about 100 bytes each); the first remembered go first; 0 keeps none."""
        self._max = max_entries
        self._authors: OrderedDict[int, int] = OrderedDict()

    def __len__(self) -> int:
        return len(self._authors)

    def known(self, tweet_ids: Iterable[int]) -> dict[int, int]:
        """The remembered authors of those tweets."""
        authors = self._authors
        return {t: authors[t] for t in tweet_ids if t in authors}

    def remember(self, found: dict[int, int]) -> None:
        if not self._max:
            return
        authors = self._authors
        authors.update(found)
        while len(authors) > self._max:
            authors.popitem(last=False)  # O(1), unlike deleting a plain dict's first keys
