"""What was built from an object, kept while that same object (by identity) comes back.

The near cache hands out the very ``EdgePage`` object it keeps for a first page until an
invalidation drops it. Building the reply from it (50 ``FollowEntry`` with timestamps and a signed
next-page token) was about a third of a cached ``ListFollowers``: with the reply remembered per page
object, a near-cache hit answers with the reply built for it. A changed list is a new page object,
so a reply is never older than the page it was built from. The memo holds each source object, so
its identity cannot be reused by another object while the entry lives.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["IdentityMemo"]

V = TypeVar("V")


class IdentityMemo(Generic[V]):
    def __init__(self, max_entries: int) -> None:
        """Up to ``max_entries`` sources; the least recently used go first; 0 keeps none."""
        self._max = max_entries
        self._built: OrderedDict[tuple[Hashable, int], tuple[object, V]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._built)

    def get(self, tag: Hashable, source: object, build: Callable[[], V]) -> V:
        """``build()``'s value for ``source`` under ``tag``: remembered if this very object was seen."""
        key = (tag, id(source))
        found = self._built.get(key)
        if found is not None and found[0] is source:
            self._built.move_to_end(key)
            return found[1]
        value = build()
        if self._max:
            self._built[key] = (source, value)
            if len(self._built) > self._max:
                self._built.popitem(last=False)
        return value
