"""Plain values passed between the service layer, the store and the cache."""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import Enum

__all__ = ["Counts", "Cursor", "Direction", "Edge", "EdgePage", "FollowResult", "now_us"]

ID_WIDTH = 20  # digits of the largest unsigned 64-bit integer
TIME_WIDTH = 16  # digits of a microsecond timestamp until the year 2286


def now_us() -> int:
    """Microseconds since the epoch: the follow timestamp and the list order."""
    return time.time_ns() // 1000


class Direction(Enum):
    """Which adjacency list of a user: who follows them, or whom they follow."""

    FOLLOWERS = "followers"
    FOLLOWING = "following"


@dataclass(frozen=True, slots=True)
class Edge:
    """One entry of an adjacency list: the other account and when the follow was made."""

    user_id: int
    at_us: int

    @property
    def position(self) -> str:
        """The entry's place in newest-first order, shared by DynamoDB sort keys and Redis members."""
        return f"{self.at_us:0{TIME_WIDTH}d}#{self.user_id:0{ID_WIDTH}d}"

    @classmethod
    def from_position(cls, position: str) -> Edge:
        at, _, user = position.partition("#")
        return cls(user_id=int(user), at_us=int(at))


Cursor = Edge
"""A page cursor is the last entry returned: the next page starts strictly after it."""


@dataclass(frozen=True, slots=True)
class EdgePage:
    entries: list[Edge]
    has_more: bool


@dataclass(frozen=True, slots=True)
class FollowResult:
    created: bool
    at_us: int


@dataclass(frozen=True, slots=True)
class Counts:
    followers: int = 0
    following: int = 0
    version: int = 0
    """Bumped by every counter write; lets the cache refuse an older value."""
