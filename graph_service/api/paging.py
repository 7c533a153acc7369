"""AIP-158 page sizes, and the page the list RPCs return."""

from __future__ import annotations

from dataclasses import dataclass

from graph_service.domain.errors import InvalidPageSize
from graph_service.domain.models import Edge

__all__ = ["Page", "page_size"]


@dataclass(frozen=True, slots=True)
class Page:
    entries: list[Edge]
    next_page_token: str


def page_size(requested: int, default: int, maximum: int) -> int:
    """AIP-158: 0 is the default, too large is clamped, negative is an error."""
    if requested < 0:
        raise InvalidPageSize(requested)
    return min(requested or default, maximum)
