"""AIP-158 pages: the size rule, signed page tokens bound to their query, and the pages returned.

A first page of a list the near cache serves comes back as the very page object it kept; its
signed reply page is remembered by that object (``identity_memo.py``), so a cached first page is
not signed again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from graph_service.domain.errors import InvalidPageSize
from graph_service.domain.models import Cursor, Edge, EdgePage
from graph_service.rules.identity_memo import IdentityMemo
from graph_service.rules.page_tokens import PageTokenCodec

__all__ = ["FIRST_PAGES_REMEMBERED", "Page", "Pager", "page_size"]

FIRST_PAGES_REMEMBERED = 1024
"""Signed first pages of followers and followings kept by the page object they came from: at the
default page size of 50, about 50,000 entries at most."""

E = TypeVar("E", bound=Edge)
E_co = TypeVar("E_co", bound=Edge, covariant=True)


class Fetched(Protocol[E_co]):
    """What a store's list read returns (``EdgePage``, ``MutePage``)."""

    @property
    def entries(self) -> Sequence[E_co]: ...

    @property
    def has_more(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class Page(Generic[E]):
    entries: Sequence[E]
    next_page_token: str


def page_size(requested: int, default: int, maximum: int) -> int:
    """AIP-158: 0 is the default, too large is clamped, negative is an error."""
    if requested < 0:
        raise InvalidPageSize(requested)
    return min(requested or default, maximum)


class Pager:
    def __init__(self, tokens: PageTokenCodec, default_size: int, max_size: int) -> None:
        self._tokens = tokens
        self._default = default_size
        self._max = max_size
        self._first_pages: IdentityMemo[Page[Any]] = IdentityMemo(FIRST_PAGES_REMEMBERED)

    async def page(
        self,
        scope: str,
        requested_size: int,
        page_token: str,
        fetch: Callable[[int, Cursor | None], Awaitable[Fetched[E]]],
        *,
        remember: bool = False,
    ) -> Page[E]:
        """One page: validate size and token (bound to ``scope``), fetch, sign the next token.
        ``remember``: a first page is kept signed by the page object ``fetch`` returned."""
        limit = page_size(requested_size, self._default, self._max)
        after = self._tokens.decode_edge(scope, page_token)
        page = await fetch(limit, after)

        def signed() -> Page[E]:
            token = self._tokens.encode(scope, page.entries[-1]) if page.has_more and page.entries else ""
            return Page(entries=page.entries, next_page_token=token)

        if not remember or after is not None:  # the near cache keeps first lists' pages only
            return signed()
        return self._first_pages.get(scope, page, signed)


async def no_entries(limit: int, after: Cursor | None) -> EdgePage:
    """A ``fetch`` for a list that is empty whatever is stored (an account out of the graph): the
    request's size and token are still checked."""
    return EdgePage(entries=[], has_more=False)
