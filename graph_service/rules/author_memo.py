"""What the home-timeline read remembers per process, bounded; neither can make a page wrong.

- ``AuthorMemo``: the authors of tweets it has looked up. A tweet's author never changes, so an
  entry is never stale and needs no invalidation. It saves the reads of authors a Redis window did
  not hold (a ``tweet_author`` key expired: the tweets table; on a Redis Cluster, where the window
  comes without its authors: a pipelined read of 32 keys per page).
- ``ReaderMemo``: per reader, notes of its last page: the authors whose relationships it needed
  and the celebrities it followed. The next page asks the graph about those accounts while its
  window is read, not after, and has those celebrities' recent tweets read with the window (one
  round trip). They are a guess only: every answer still comes from the graph, read for this
  page; a guess that missed costs the round trips it would have saved. And the last next-page
  token it signed (a token is a function of the page, so it stays true).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

__all__ = ["AuthorMemo", "ReaderMemo", "ReaderNotes"]


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


class ReaderNotes:
    """What the read noted of one reader's last page."""

    __slots__ = ("authors", "celebrities", "token")

    def __init__(self) -> None:
        self.authors: frozenset[int] = frozenset()
        """The authors of the entries it looked at (whose relationships it needed)."""
        self.celebrities: frozenset[int] = frozenset()
        """The celebrities the reader followed."""
        self.token: tuple[int, str] = (0, "")
        """The last entry it returned and the next-page token it signed for it: the same page read
        again hands out the same token without signing it again."""


class ReaderMemo:
    def __init__(self, max_readers: int) -> None:
        """Notes of up to ``max_readers`` readers, the longest unread forgotten first; 0 keeps none."""
        self._max = max_readers
        self._readers: OrderedDict[int, ReaderNotes] = OrderedDict()

    def __len__(self) -> int:
        return len(self._readers)

    def notes(self, reader: int) -> ReaderNotes:
        """The reader's notes, to read and to update (empty ones for a reader not noted yet)."""
        readers = self._readers
        found = readers.get(reader)
        if found is not None:
            readers.move_to_end(reader)
            return found
        found = ReaderNotes()
        if self._max:
            readers[reader] = found
            if len(readers) > self._max:
                readers.popitem(last=False)
        return found
