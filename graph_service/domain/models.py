"""Plain values passed between the service layer, the adapters and the consumers."""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum

__all__ = [
    "AcceptOutcome",
    "BudgetGrant",
    "Counts",
    "Cursor",
    "Direction",
    "Edge",
    "EdgePage",
    "FollowResult",
    "FollowState",
    "LeaseRecord",
    "Made",
    "Mute",
    "MutePage",
    "PairState",
    "Relationship",
    "Tweet",
    "TweetCursor",
]

ID_WIDTH = 20  # digits of the largest unsigned 64-bit integer
TIME_WIDTH = 16  # digits of a microsecond timestamp until the year 2286


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
"""A list's page cursor is the last entry returned: the next page starts strictly after it."""


@dataclass(frozen=True, slots=True)
class TweetCursor:
    """A timeline's page cursor: the last tweet ID returned; the next page holds older tweets only."""

    tweet_id: int


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
    ``created`` is False when the call found it already there, or made the follow by accepting
    the follower's own earlier request (nothing new for the rate limit)."""

    created: bool
    at_us: int
    state: FollowState = FollowState.FOLLOWING


class AcceptOutcome(Enum):
    """What one attempt to turn a pending request into an edge did."""

    ACCEPTED = "accepted"
    """The request is gone and the edge is made."""
    CHANGED = "changed"
    """The request was not the one read any more (withdrawn, rejected, accepted meanwhile): read again."""
    PRIVATE = "private"
    """The accept was made on behalf of a public account, and the account is private now."""


@dataclass(frozen=True, slots=True)
class Relationship:
    """How an actor and a target relate, from the actor's side."""

    following: bool = False
    followed_by: bool = False
    requested: bool = False
    requested_by: bool = False
    blocking: bool = False
    blocked_by: bool = False
    mute_expires_us: int | None = None
    """The actor's mute of the target, as stored: None, no mute; 0, until unmuted; else when it ends
    (a mute past its end is stored until reclaimed, but not in force: ``as_of``)."""
    muting_notifications: bool = False

    FLAGS = ("following", "followed_by", "requested", "requested_by", "blocking", "blocked_by")

    @property
    def muting(self) -> bool:
        """A mute is stored (call ``as_of`` first to leave out one that has ended)."""
        return self.mute_expires_us is not None

    def as_of(self, now_us: int) -> Relationship:
        """The relationship at ``now_us``: a mute that has ended is left out."""
        if self.mute_expires_us is None or not 0 < self.mute_expires_us <= now_us:
            return self
        return replace(self, mute_expires_us=None, muting_notifications=False)

    def encode(self) -> str:
        """The cache's relationship value: six '0'/'1' characters in ``FLAGS`` order. The mute is a
        value of its own (``encode_mute``, under its own key), so that the relationship value keeps
        the format every release reads and writes."""
        return "".join("1" if getattr(self, flag) else "0" for flag in self.FLAGS)

    @classmethod
    def decode(cls, text: str) -> Relationship:
        return cls(*(c == "1" for c in text))  # positional, in FLAGS order: the hot path of cached reads

    def encode_mute(self) -> str:
        """The cache's mute value: ``-`` for no mute, else ``<end>:<0|1>`` (end 0: none; notifications)."""
        if self.mute_expires_us is None:
            return "-"
        return f"{self.mute_expires_us}:{int(self.muting_notifications)}"

    def with_mute(self, text: str) -> Relationship:
        """This relationship with the mute of a cache value written by ``encode_mute``."""
        if text == "-":
            return (
                self
                if self.mute_expires_us is None
                else replace(self, mute_expires_us=None, muting_notifications=False)
            )
        expires, _, notifications = text.partition(":")
        return replace(self, mute_expires_us=int(expires), muting_notifications=notifications == "1")


@dataclass(frozen=True, slots=True)
class Mute(Edge):
    """One entry of a user's mutes: the muted account, when the mute was made (its place in
    ``ListMutes``), when it ends (0: until unmuted) and whether notifications are muted too."""

    expires_us: int = 0
    notifications: bool = False

    def in_force(self, now_us: int) -> bool:
        return self.expires_us == 0 or self.expires_us > now_us


@dataclass(frozen=True, slots=True)
class MutePage:
    entries: list[Mute]
    has_more: bool


@dataclass(frozen=True, slots=True)
class Counts:
    followers: int = 0
    following: int = 0
    version: int = 0
    """Bumped by every counter write; lets the cache refuse an older value."""


@dataclass(frozen=True, slots=True)
class PairState:
    """Every item between an actor and a target, as the timestamp it holds (None: absent)."""

    following: int | None = None
    followed_by: int | None = None
    requested: int | None = None
    requested_by: int | None = None
    blocking: int | None = None
    blocked_by: int | None = None

    @property
    def blocked(self) -> bool:
        return self.blocking is not None or self.blocked_by is not None

    def relationship(self) -> Relationship:
        return Relationship(
            following=self.following is not None,
            followed_by=self.followed_by is not None,
            requested=self.requested is not None,
            requested_by=self.requested_by is not None,
            blocking=self.blocking is not None,
            blocked_by=self.blocked_by is not None,
        )


@dataclass(frozen=True, slots=True)
class Tweet:
    tweet_id: int
    author_id: int
    text: str


class Made(Enum):
    """What a conditional write of a follow or a request did."""

    CREATED = "created"
    REFUSED = "refused"
    """A condition refused it: the item exists already, a request or a block is in the way, or
    something changed since it was read."""
    AT_CAP = "at_cap"
    """The follower has as many follows plus pending requests as the cap allows (and maybe more refusals)."""


@dataclass(frozen=True, slots=True)
class BudgetGrant:
    """The answer of ``FollowBudget.take``: a ticket to give back, or how long until one is free.

    ``ticket`` is empty when nothing was counted: refused, or the ledger could not be reached
    and the limit failed open (``counted`` False)."""

    granted: bool
    ticket: str = ""
    retry_after_seconds: float = 0.0

    @property
    def counted(self) -> bool:
        return bool(self.ticket)


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """A live cache lease as the store holds it (``LeaseRegistry``)."""

    beat: int
    """Heartbeats counted: a holder that stops beating is presumed gone."""
    unsettled: bool
    """A write under it left the cache unsettled: its holder owes invalidations."""
