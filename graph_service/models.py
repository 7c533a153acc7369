"""Plain values passed between the service layer, the store and the cache."""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import Enum

__all__ = [
    "BlockResult",
    "Counts",
    "Cursor",
    "Direction",
    "Edge",
    "EdgePage",
    "FollowResult",
    "FollowState",
    "Relationship",
    "Removal",
    "now_us",
]

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


class FollowState(Enum):
    """What a Follow call left behind."""

    FOLLOWING = "following"
    REQUESTED = "requested"


@dataclass(frozen=True, slots=True)
class FollowResult:
    """``at_us`` is when the edge (FOLLOWING) or the pending request (REQUESTED) was made;
    ``created`` is False when the call found it already there."""

    created: bool
    at_us: int
    state: FollowState = FollowState.FOLLOWING


@dataclass(frozen=True, slots=True)
class Removal:
    """What an unfollow (or a follower removal) took away: the edge's and the request's timestamps."""

    edge_at: int | None = None
    request_at: int | None = None


@dataclass(frozen=True, slots=True)
class BlockResult:
    """The edges a block removed, as ``(follower, followee, at_us)``, and whether the block is new."""

    created: bool
    removed_edges: tuple[tuple[int, int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Relationship:
    """How an actor and a target relate, from the actor's side."""

    following: bool = False
    followed_by: bool = False
    requested: bool = False
    requested_by: bool = False
    blocking: bool = False
    blocked_by: bool = False

    FLAGS = ("following", "followed_by", "requested", "requested_by", "blocking", "blocked_by")

    def encode(self) -> str:
        """Six '0'/'1' characters in ``FLAGS`` order (the cache's value)."""
        return "".join("1" if getattr(self, flag) else "0" for flag in self.FLAGS)

    @classmethod
    def decode(cls, text: str) -> Relationship:
        return cls(*(c == "1" for c in text))


@dataclass(frozen=True, slots=True)
class Counts:
    followers: int = 0
    following: int = 0
    version: int = 0
    """Bumped by every counter write; lets the cache refuse an older value."""
