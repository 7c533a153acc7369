"""User and tweet IDs: unsigned 64-bit integers greater than 0 (SPEC §2), checked here only."""

from __future__ import annotations

from graph_service.domain.errors import InvalidUserId, SelfRelation

__all__ = ["MAX_ID", "is_id", "require_id", "require_pair"]

MAX_ID = 2**64 - 1


def is_id(value: int) -> bool:
    """Whether ``value`` can name a user or a tweet."""
    return 0 < value <= MAX_ID


def require_id(value: int, field: str) -> int:
    """``value``, or ``InvalidUserId`` naming the request field it came from."""
    if not is_id(value):
        raise InvalidUserId(field)
    return value


def require_pair(first: int, first_field: str, second: int, second_field: str) -> None:
    """Two valid IDs of two different accounts."""
    require_id(first, first_field)
    require_id(second, second_field)
    if first == second:
        raise SelfRelation(first)
