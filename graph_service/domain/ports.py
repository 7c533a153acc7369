"""Role interfaces: what each user of an adapter needs of it, and nothing more.

One adapter may play several roles (``DynamoGraphStore`` is ``GraphWrites``, ``GraphReads``,
``RelationshipReads``, ``FollowerSource`` and ``MuteStore``); each user is given the narrowest role it needs, so
an in-memory fake of that role is enough for its unit tests (``tests/support/fakes``), and the
same contract tests hold the fake and the real adapter to one behaviour (``tests/support/contracts``).

Rules do not live here: an adapter stores and fetches; the service layer decides.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from graph_service.domain.fences import CounterUpdate, Fence
from graph_service.domain.models import (
    AcceptOutcome,
    BudgetGrant,
    Counts,
    Cursor,
    Direction,
    Edge,
    EdgePage,
    LeaseRecord,
    Made,
    Mute,
    MutePage,
    PairState,
    Relationship,
)

__all__ = [
    "CacheInvalidations",
    "CacheRepairs",
    "CacheableReads",
    "CountCache",
    "CountReads",
    "CounterTable",
    "EdgeLookup",
    "FollowBudget",
    "FollowerCache",
    "FollowerSource",
    "GraphCacheReads",
    "GraphChanges",
    "GraphReads",
    "GraphWrites",
    "IntersectionReads",
    "LeaseRegistry",
    "ListCache",
    "ListReads",
    "MuteReads",
    "MuteStore",
    "MuteWrites",
    "RelationshipReads",
    "SuggestionCache",
    "TimelineReads",
    "TimelineWindow",
    "TimelineWrites",
    "TweetAuthors",
]


class GraphWrites(Protocol):
    """The graph's conditional writes and the strongly consistent reads they decide from.

    Each write is one transaction that commits whole or not at all. A write that returns False
    (or a ``Made`` other than ``CREATED``) was refused by one of its conditions (something between
    the two accounts changed since it was read): nothing was written, and the caller reads the
    pair again and decides afresh.
    """

    async def pair(self, actor_id: int, target_id: int) -> PairState:
        """Every item between the two accounts, as one snapshot."""
        ...

    async def request_at(self, user_id: int, requester_id: int) -> int | None:
        """When the requester's pending request to follow ``user_id`` was made; None if there is none."""
        ...

    async def edge_at(self, follower_id: int, followee_id: int) -> int | None:
        """When the follow was made; None if there is none."""
        ...

    async def add_edge(self, follower_id: int, followee_id: int, at_us: int, *, cap: int = 0) -> Made:
        """Make the follow at ``at_us``, unless it exists, a request of the follower to the
        followee is pending, or either account blocks the other; with ``cap``, also unless the
        follower has ``cap`` follows plus pending requests already (``AT_CAP``)."""
        ...

    async def add_request(self, follower_id: int, followee_id: int, at_us: int, *, cap: int = 0) -> Made:
        """Make a pending request at ``at_us``, unless one exists, the follow exists, or either
        account blocks the other; ``cap`` as for ``add_edge`` (a pending request holds a place)."""
        ...

    async def accept(
        self, user_id: int, requester_id: int, requested_at: int, at_us: int, *, while_public: bool
    ) -> AcceptOutcome:
        """Replace the request made at ``requested_at`` by a follow made at ``at_us``.
        ``while_public``: only while the account's setting says public."""
        ...

    async def remove(self, follower_id: int, followee_id: int, *, edge_at: int | None, request_at: int | None) -> bool:
        """Delete the follow made at ``edge_at`` and the request made at ``request_at`` (either may be
        None), unless either is not the one read any more."""
        ...

    async def add_block(self, blocker_id: int, blocked_id: int, at_us: int, pair: PairState) -> bool:
        """Put the block and delete every follow and request of ``pair`` (the blocker's view, as
        read), unless the block exists or any item between the two changed since ``pair`` was read."""
        ...

    async def remove_block(self, blocker_id: int, blocked_id: int) -> bool:
        """Lift the block; whether there was one."""
        ...

    async def set_private(self, user_id: int, private: bool) -> None:
        """Store the account's privacy setting (requests are not touched here)."""
        ...

    async def is_private_now(self, user_id: int) -> bool:
        """The account's privacy setting, strongly consistent (never from a cache)."""
        ...


class GraphChanges(Protocol):
    """Told what every acknowledged write left between two accounts, whether it changed anything or
    found that state already there, before the call returns: the Redis graph cache is written through
    from here (``CacheWriteThrough``), and without a cache nothing happens (``NoGraphCache``).
    Never raises: a cache that cannot be told owes the notice and is not read until it is delivered."""

    async def follow_settled(self, follower_id: int, followee_id: int, at_us: int | None, *, following: bool) -> None:
        """The follow exists, made at ``at_us`` (``following``); or it does not, and ``at_us`` is when the
        removed one was made (None: there was none)."""
        ...

    async def pair_settled(self, a: int, b: int) -> None:
        """Requests or blocks between the two may have changed."""
        ...

    async def settings_settled(self, user_id: int) -> None:
        """The account's privacy setting or lifecycle state may have changed."""
        ...

    async def mute_settled(self, muter_id: int, muted_id: int) -> None:
        """The muter's mute of the muted account may have changed."""
        ...


class MuteWrites(Protocol):
    """A user's mutes, stored in the user's own partition (they touch no other account's items)."""

    async def mute_of(self, muter_id: int, muted_id: int) -> Mute | None:
        """The stored mute (also one that has ended and is not reclaimed yet), strongly consistent."""
        ...

    async def put_mute(self, muter_id: int, mute: Mute, *, replacing: Mute | None) -> bool:
        """Store ``mute`` of ``mute.user_id`` in place of ``replacing`` (None: there is none); False,
        with nothing written, if the stored mute is not ``replacing`` any more."""
        ...

    async def remove_mute(self, muter_id: int, mute: Mute) -> bool:
        """Delete the mute read as ``mute``; False, with nothing written, if its time or end changed since."""
        ...


class MuteReads(Protocol):
    async def list_mutes(self, user_id: int, limit: int, after: Cursor | None, *, now_us: int) -> MutePage:
        """Up to ``limit`` mutes in force at ``now_us`` (ended ones skipped, however many), newest
        first by when they were made, strictly after ``after``."""
        ...


class MuteStore(MuteWrites, MuteReads, Protocol):
    """Where a user's mutes are kept: the graph store."""


class ListReads(Protocol):
    async def list_edges(self, direction: Direction, user_id: int, limit: int, after: Cursor | None) -> EdgePage:
        """Up to ``limit`` entries of the user's list, newest first, strictly after ``after``."""
        ...


class CountReads(Protocol):
    async def get_counts(self, user_ids: Sequence[int]) -> dict[int, Counts]:
        """Counters of each distinct user (zeros for users never counted)."""
        ...


class EdgeLookup(Protocol):
    async def find_edges(self, direction: Direction, user_id: int, others: Sequence[int]) -> dict[int, int]:
        """Which of ``others`` are in the user's list, with the follow times."""
        ...


class IntersectionReads(ListReads, CountReads, EdgeLookup, Protocol):
    """What ListKnownFollowers and ListMutualFollows read: lists, counts (to pick the smaller side)
    and membership lookups."""


class GraphReads(IntersectionReads, Protocol):
    """What the service layer reads to answer the list, count and follow-state RPCs."""

    async def is_following(self, follower_id: int, followee_id: int) -> bool:
        """Strongly consistent: reflects every acknowledged write."""
        ...

    async def list_requests(self, user_id: int, limit: int, after: Cursor | None) -> EdgePage:
        """Incoming pending requests, newest first, strictly after ``after``."""
        ...

    async def is_private(self, user_id: int) -> bool:
        """The account's privacy setting (may be served from a cache that is kept exact)."""
        ...


class RelationshipReads(Protocol):
    async def relationships(self, actor_id: int, target_ids: Sequence[int]) -> dict[int, Relationship]:
        """How the actor relates to each distinct target; strongly consistent."""
        ...


class CacheableReads(GraphReads, RelationshipReads, Protocol):
    """What the read-through cache reads behind Redis."""


class FollowerSource(Protocol):
    """What the fanout reads of the graph: how many followers an author has, and who they are."""

    async def follower_count(self, user_id: int) -> int:
        """The counters' follower count (it lags the edges by about a second)."""
        ...

    async def list_followers(self, user_id: int, limit: int, after: Cursor | None) -> EdgePage:
        """Up to ``limit`` followers, newest first, strictly after ``after``."""
        ...


class CountCache(Protocol):
    """The counters' values kept in the graph cache."""

    async def get_counts(self, user_ids: Sequence[int]) -> dict[int, Counts]:
        """The cached counts of those users that are cached (none while the cache is not trusted)."""
        ...

    async def set_counts(self, user_id: int, counts: Counts) -> bool:
        """Keep the counts unless a version as new is cached; False: Redis failed (a refused older
        version is True: nothing is owed)."""
        ...


class ListCache(Protocol):
    """Whole adjacency lists kept in the graph cache, read a page at a time."""

    async def read_list(self, direction: Direction, user_id: int, limit: int, after: Cursor | None) -> EdgePage | None:
        """A page of a cached whole list (newest first, strictly after ``after``); None on a miss."""
        ...


class FollowerCache(CountCache, ListCache, Protocol):
    """What the fanout reads of the graph cache (it never fills it)."""


class CacheInvalidations(Protocol):
    """The write side of the graph cache: what a committed write changes in it. False: the change
    was not delivered (Redis failed). ``write_edge``, ``touch_pair``, ``drop_private`` and
    ``drop_mute`` then owe it, and the cache is not trusted by reads until it is delivered
    (``essential``: tried even while Redis is thought down; ``write_edge`` always is);
    ``invalidate_edge`` owes nothing (it is the retry)."""

    async def write_edge(self, follower_id: int, followee_id: int, at_us: int | None, following: bool) -> bool:
        """After a committed follow (``following``) or unfollow of the edge made at ``at_us`` (None:
        an unfollow that found no edge: only the follow state is dropped)."""
        ...

    async def touch_pair(self, a: int, b: int, *, essential: bool = True) -> bool:
        """After a committed request or block change between ``a`` and ``b`` (the counters consumer's
        repair of a mute too: it drops both entries of the pair, the mute's included)."""
        ...

    async def drop_private(self, user_id: int, *, essential: bool = True) -> bool:
        """After a committed privacy change."""
        ...

    async def drop_mute(self, muter_id: int, muted_id: int, *, essential: bool = True) -> bool:
        """After a committed mute or unmute: the muter's entry of it (only the muter's slot)."""
        ...

    async def invalidate_edge(self, follower_id: int, followee_id: int, *, essential: bool = False) -> bool:
        """Drop every entry a change of the edge follower -> followee may have made stale (its follow
        state, the follower's following list, the followee's followers list, both relationships,
        suggestions and privacy flags) and move both epochs; ``(u, u)``: u's privacy flag."""
        ...


class CacheRepairs(CountCache, Protocol):
    """What the counters consumer does to the graph cache after committed changes: it repeats from
    the stream what each replica's write-through did, so a crash or a failed write-through never
    leaves a stale entry for long."""

    async def repair_edge(self, follower_id: int, followee_id: int, at_us: int, following: bool) -> bool:
        """Delete any cached follow state or list that disagrees with the committed change of the edge
        made at ``at_us`` (a list whose entry was tombstoned by a later unfollow is left alone), drop
        both relationships and suggestions, and move both epochs (fills under way are refused)."""
        ...

    async def touch_pair(self, a: int, b: int, *, essential: bool = True) -> bool: ...

    async def drop_private(self, user_id: int, *, essential: bool = True) -> bool: ...


class GraphCacheReads(CountCache, ListCache, Protocol):
    """What the read-through (``cache/cached_graph.py``) asks of the graph cache. A fill is guarded
    by an epoch read before the store was: a write that came between moves the epoch, and the fill
    is refused. An epoch of None means: do not fill (the cache is not trusted now)."""

    @property
    def list_limit(self) -> int:
        """Lists longer than this are never cached whole."""
        ...

    async def epoch(self, user_id: int) -> str | None: ...

    async def privacy_epoch(self, user_id: int) -> str | None:
        """The epoch of the user's privacy flag (moved only by privacy changes)."""
        ...

    async def get_follow_state(self, follower_id: int, followee_id: int) -> bool | None: ...

    async def fill_follow_state(self, follower_id: int, followee_id: int, following: bool, seen: str) -> None: ...

    async def fill_list(self, direction: Direction, user_id: int, seen: str, entries: AsyncIterator[Edge]) -> bool:
        """Keep the whole list (all of ``entries``) unless the epoch moved past ``seen`` or it is
        longer than ``list_limit``; whether it was kept."""
        ...

    async def read_relationships(
        self, actor_id: int, target_ids: Sequence[int]
    ) -> tuple[dict[int, Relationship], str | None]:
        """The cached relationships, and the actor's epoch to guard a fill of the rest (None: do not fill)."""
        ...

    async def fill_relationships(self, actor_id: int, found: dict[int, Relationship], seen: str) -> None: ...

    async def get_private(self, user_id: int) -> bool | None: ...

    async def fill_private(self, user_id: int, private: bool, seen: str) -> None:
        """Keep the flag unless the privacy epoch moved past ``seen``."""
        ...


class SuggestionCache(Protocol):
    """Where ranked suggestions are kept for a while; a fill is refused if a write came between."""

    async def get_suggestions(self, user_id: int) -> str | None: ...

    async def epoch(self, user_id: int) -> str | None:
        """The user's epoch before the ranking is computed; None: do not fill."""
        ...

    async def fill_suggestions(self, user_id: int, value: str, seen: str, ttl_seconds: int) -> None:
        """Keep ``value`` unless the user's epoch moved past ``seen``."""
        ...


class LeaseRegistry(Protocol):
    """The store's side of the cache's trust (``cache/lease.py``): the serving processes' cache
    leases, each live (its holder beats) or revoked (for good: its holder stopped beating)."""

    async def register(self, lease_id: str) -> None:
        """Honour a new lease; ``ValueError`` for an ID registered before (revoked or not)."""
        ...

    async def beat(self, lease_id: str) -> bool:
        """Count one heartbeat of a live lease; False if it is not live (revoked or unknown)."""
        ...

    async def mark_unsettled(self, lease_id: str) -> bool:
        """Record that a write under this lease left the cache unsettled; False if it is not live."""
        ...

    async def live_leases(self) -> dict[str, LeaseRecord]:
        """Every live lease, with its heartbeat count."""
        ...

    async def revoke(self, lease_id: str, beat: int) -> bool:
        """Revoke the lease if it is live and its heartbeat count is still ``beat``."""
        ...

    async def is_live(self, lease_id: str) -> bool: ...

    async def forget(self, lease_id: str) -> None:
        """Drop a lease given up cleanly."""
        ...


class TimelineWrites(Protocol):
    """What the fanout writes. Every call is idempotent: the merge keeps each tweet once, newest first."""

    async def record_tweet(self, author_id: int, tweet_id: int) -> list[int]:
        """Remember the tweet among its author's recent ones, and who wrote it; return the author's
        new followers (noted by ``note_follow`` lately), read in the same atomic step."""
        ...

    async def note_follow(self, followee_id: int, follower_id: int, *, followed: bool) -> list[int]:
        """Note a follow among the followee's new followers (or forget it, when ``followed`` is
        false) and return the followee's recent tweets, newest first, read in the same atomic step.
        With ``record_tweet`` this is the backfill handshake: whichever runs second sees the other."""
        ...

    async def push(self, tweet_id: int, user_ids: Sequence[int]) -> None:
        """Put one tweet into each user's home timeline."""
        ...

    async def merge(self, user_id: int, tweet_ids: Sequence[int]) -> int:
        """Put tweets (in any order) into one home timeline; how many were new."""
        ...

    async def remove(self, user_id: int, tweet_ids: Sequence[int]) -> int:
        """Take tweets out of one home timeline; how many were there."""
        ...

    async def recent(self, author_id: int) -> list[int]:
        """The author's recent tweets, newest first."""
        ...

    async def mark_celebrity(self, author_id: int, followers: int) -> None: ...

    async def forget_account(self, user_id: int) -> None:
        """A deleted account's home timeline, recent tweets and celebrity mark."""
        ...

    async def is_celebrity(self, author_id: int) -> bool: ...


@dataclass(frozen=True, slots=True)
class TimelineWindow:
    """A window of a home timeline and what merging and filtering it needs (``TimelineReads.window``).

    Its range runs from ``older_than`` (excluded) down to ``floor`` (included): the tweets a reader
    merges into this window. The next window starts below ``floor``, so a walk over the windows
    meets every tweet of the pulled authors once."""

    entries: list[int]
    """The pushed entries, newest first: the first ``limit`` older than ``older_than``."""
    pulled: dict[int, list[int]]
    """Each asked author's recent tweets in the window's range, newest first."""
    authors: dict[int, int] | None
    """The cached authors of the entries (an entry not here has none cached), or None when they were
    not read (ask ``authors``)."""
    older_than: int | None
    """The cursor the window was read after (None: from the newest)."""
    floor: int | None
    """The window's oldest entry if it holds ``limit`` entries; None if fewer: the timeline's end, and
    every older tweet is in the range."""

    def cut(self, newest_first: Sequence[int]) -> list[int]:
        """The IDs of a newest-first list that are in the window's range."""
        above, floor = self.older_than, self.floor
        kept = []
        for tweet_id in newest_first:
            if floor is not None and tweet_id < floor:
                break
            if above is None or tweet_id < above:
                kept.append(tweet_id)
        return kept


class TimelineReads(Protocol):
    """What the home-timeline read path reads."""

    async def window(
        self, user_id: int, limit: int, *, older_than: int | None, pulled: Sequence[int]
    ) -> TimelineWindow:
        """A window of ``limit`` (> 0) entries of the home timeline after ``older_than`` (from the
        newest if None), with the recent tweets of the ``pulled`` authors in its range and, where the
        store can read them in the same step, its entries' cached authors."""
        ...

    async def home(self, user_id: int, limit: int | None = None, *, older_than: int | None = None) -> list[int]:
        """The pushed timeline, newest first: its first ``limit`` entries (all if None or 0) older
        than ``older_than`` (from the newest if None)."""
        ...

    async def celebrities(self) -> list[int]: ...

    async def recent_of_many(self, authors: Sequence[int]) -> dict[int, list[int]]:
        """Each author's recent tweets, newest first."""
        ...

    async def authors(self, tweet_ids: Sequence[int]) -> dict[int, int]:
        """Cached authors of those tweets whose entry is cached."""
        ...

    async def fill_authors(self, found: dict[int, int]) -> None: ...


class TweetAuthors(Protocol):
    async def authors(self, tweet_ids: Sequence[int]) -> dict[int, int]:
        """The author of each of those tweets that exists."""
        ...


class CounterTable(Protocol):
    """The users' counters, as the counters consumer reads and writes them."""

    async def read_counts(self, user_ids: Sequence[int]) -> dict[int, Counts]:
        """Current counters, strongly consistent (zeros, version 0, for users never counted)."""
        ...

    async def commit(self, updates: Sequence[CounterUpdate], fence: Fence) -> bool:
        """Write every update and the fence in one transaction. False: a counter's version moved
        since it was read (read again); ``FenceRejected``: the fence refused. Nothing is written then."""
        ...


class FollowBudget(Protocol):
    """The follow rate limit's ledger (SPEC §7.2): each actor's counted follows in a sliding window.

    A follow takes a ticket before it writes and gives it back if it made nothing (a repeat, a
    refusal, a failure), so concurrent follows of one actor never pass the limit together and
    only follows that created an edge or a request stay counted."""

    async def take(self, actor_id: int, limit: int, window_seconds: int) -> BudgetGrant:
        """A ticket if fewer than ``limit`` follows were counted in the last ``window_seconds``;
        else a refusal saying when the oldest counted follow leaves the window."""
        ...

    async def give_back(self, actor_id: int, ticket: str) -> None:
        """Uncount the follow of ``ticket`` (it made nothing)."""
        ...
