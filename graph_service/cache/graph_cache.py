"""The graph's Redis cache: every operation is one script or one read in one user's slot.

Failure rule: a Redis error never fails a caller. A read that fails is a miss (so is one skipped
because the cache is not trusted: a miss is a read that went to DynamoDB); a write-through
that fails leaves a *pending invalidation*, and until every pending invalidation has been
delivered the cache is not trusted for reads (callers go to DynamoDB). The counters consumer
also invalidates every edge it sees, which covers other replicas and crashes.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TypeVar

import structlog
from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError

from graph_service.cache import keys, scripts
from graph_service.cache.near_cache import NearCache
from graph_service.cache.trust import Queue, TrustCheck
from graph_service.domain.models import Counts, Cursor, Direction, Edge, EdgePage, Relationship
from graph_service.domain.times import now_us
from graph_service.redis_client.connect import AnyRedis
from graph_service.redis_client.failures import ANY_FAILURE, retry_torn
from graph_service.redis_client.packed import script_calls
from graph_service.telemetry.cache import CacheMetrics

__all__ = ["GraphCache"]

log = structlog.get_logger(__name__)
T = TypeVar("T")
SENTINEL = "!"  # sorts before every "<digits>#<digits>" member; keeps empty lists cached
BREAKER_SECONDS = 1.0
TOMBSTONE_MS = 300_000  # far longer than any write takes from commit to cache
FILL_CHUNK = 1000


class GraphCache:
    """The graph's Redis entries (also the ``SuggestionCache``); used by the read-through and
    write-through wrappers of the API and by the counters consumer's repairs."""

    def __init__(
        self,
        redis: AnyRedis,
        *,
        ttl_seconds: int,
        list_limit: int,
        max_in_flight: int = 256,
        near: NearCache | None = None,
        trust: TrustCheck | None = None,
    ) -> None:
        """``trust``: every read checks the cache's trust in its round trip (``cache/trust.py``); the
        processes always pass one (``entrypoints/components.py``), None is for tests of one process."""
        self._redis = redis
        self._near = near
        self._trust = trust
        """The serving process's copy of hot entries (follow states, counts, first pages, relationships), or None."""
        # redis-py raises "Too many connections" past its pool size instead of waiting; a call
        # over the limit waits here for its turn, so a burst never trips the circuit breaker.
        self._in_flight = asyncio.Semaphore(max_in_flight)
        self._ttl = ttl_seconds
        self._list_limit = list_limit
        self._down_until = 0.0
        # owed invalidations: edge -> how many failed write-throughs it has had (see _flush_pending)
        self._pending: dict[tuple[int, int], int] = {}
        self._dropped = False
        self._flusher: asyncio.Task[None] | None = None
        self._write_edge = redis.register_script(scripts.WRITE_EDGE)
        self._fill = redis.register_script(scripts.FILL_IF_EPOCH)
        self._commit_list = redis.register_script(scripts.COMMIT_LIST_FILL)
        self._set_counts = redis.register_script(scripts.SET_COUNTS)
        self._drop = redis.register_script(scripts.DROP)
        self._fill_many = redis.register_script(scripts.FILL_MANY_IF_EPOCH)
        self._repair = redis.register_script(scripts.REPAIR_EDGE)
        self._epoch = redis.register_script(scripts.EPOCH)
        self.hits = 0
        self.misses = 0
        """Every kind but ``privacy``, summed (what tests and benchmarks read); by kind in ``report_to``'s
        metrics. A miss is a read that went to DynamoDB: absent from Redis, Redis failed, or the cache
        was not trusted (breaker open, invalidations owed) so Redis was not asked."""
        self._metrics = CacheMetrics()

    def _count(self, kind: str, hits: int, misses: int) -> None:
        """Count ``hits`` and ``misses`` reads of ``kind`` (``privacy`` stays out of the ints)."""
        if kind != "privacy":
            self.hits += hits
            self.misses += misses
        self._metrics.count(kind, hits, misses)

    def start(self) -> None:
        """Open the near cache's invalidation connection (in the background; until it tracks, the
        near cache is bypassed)."""
        if self._near is not None:
            self._near.start()

    def report_to(self, metrics: CacheMetrics) -> None:
        """Count hits and misses by kind into ``metrics`` (the process's registry), which also reads
        the circuit breaker and the owed invalidations when scraped."""
        self._metrics = metrics
        metrics.watch(lambda: time.monotonic() < self._down_until, lambda: len(self._pending))

    @property
    def list_limit(self) -> int:
        """Lists longer than this are never cached whole."""
        return self._list_limit

    # -- failure handling -------------------------------------------------------------------

    @property
    def owes(self) -> bool:
        """Invalidations of failed write-throughs are still owed (or were dropped at shutdown)."""
        return bool(self._pending) or self._dropped

    @property
    def trusted(self) -> bool:
        """Reads may use the cache: Redis answers and no invalidation is owed."""
        return not self._pending and time.monotonic() >= self._down_until

    async def _try(self, call: Callable[[], Awaitable[T]], *, essential: bool = False) -> tuple[bool, T | None]:
        """Run one Redis call; (False, None) if Redis failed or the breaker is open.

        ``essential`` calls (a replica's write-through after a committed write) are tried even
        while the breaker is open: other replicas may still read the entries they drop, so
        skipping one would leave a stale entry behind for as long as it stays owed. The price:
        while Redis hangs, each write waits up to the Redis timeout for its invalidation.
        """
        if not essential and time.monotonic() < self._down_until:
            return False, None
        try:
            async with self._in_flight:
                # Every call made here is idempotent: one more try on a torn connection is safe.
                return True, await retry_torn(call, attempts=2)
        except ANY_FAILURE as exc:  # for the failure rule every Redis failure is a miss
            if time.monotonic() >= self._down_until:
                log.warning("redis_unavailable", error=str(exc))
            self._down_until = time.monotonic() + BREAKER_SECONDS
            return False, None

    def _owe(self, follower_id: int, followee_id: int) -> None:
        pair = (follower_id, followee_id)
        self._pending[pair] = self._pending.get(pair, 0) + 1
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_pending())

    async def _flush_pending(self) -> None:
        while self._pending:
            await asyncio.sleep(max(0.05, self._down_until - time.monotonic()))
            for pair, owed in list(self._pending.items()):
                # Forget the debt only if no write of this edge failed while the invalidation ran.
                if await self.invalidate_edge(*pair) and self._pending.get(pair) == owed:
                    del self._pending[pair]
        log.info("redis_invalidations_delivered")

    # -- follow state -----------------------------------------------------------------------

    async def epoch(self, user_id: int) -> str | None:
        """The user's epoch before a store read, or None if a fill must not be tried."""
        return await self._read_epoch(keys.epoch(user_id))

    async def privacy_epoch(self, user_id: int) -> str | None:
        """The epoch of the user's privacy flag, bumped only by privacy changes: the flag of a
        much-followed account would seldom fill under the user's epoch, which every follow bumps."""
        return await self._read_epoch(keys.privacy_epoch(user_id))

    async def _read_epoch(self, key: str) -> str | None:
        if not self.trusted:
            return None
        sha = self._epoch.sha
        ok, values = await self._try(lambda: self._read(lambda pipe: pipe.execute_command("EVALSHA", sha, 1, key)))
        return str(values[0]) if ok and values is not None else None

    async def _read(self, queue: Queue) -> list[object] | None:
        """The replies of the commands ``queue`` puts on a pipeline, after the trust check (None:
        the cache may not be trusted now: a miss that fills nothing)."""
        try:
            return await self._read_once(queue)
        except NoScriptError:  # Redis restarted or flushed its scripts: load the read's ones again
            for source in (scripts.CHECK_TRUST, scripts.EPOCH):
                await self._redis.script_load(source)
            return await self._read_once(queue)

    async def _read_once(self, queue: Queue) -> list[object] | None:
        if self._trust is not None:
            return await self._trust.read(queue)
        pipe = self._redis.pipeline(transaction=False)
        queue(pipe)
        return list(await pipe.execute())

    async def get_follow_state(self, follower_id: int, followee_id: int) -> bool | None:
        if not self.trusted:
            self._count("follow_state", 0, 1)
            return None
        key = keys.follow_state(follower_id, followee_id)
        near = await self._near_values("follow_state", [key])
        if near is not None:
            self._count("follow_state", 1, 0)
            return bool(near[0] == "1")
        stamp = self._near.stamp(key) if self._near is not None else None
        ok, values = await self._try(lambda: self._read(lambda pipe: pipe.get(key)))
        value = values[0] if ok and values is not None else None
        if value is None:
            self._count("follow_state", 0, 1)
            return None
        self._count("follow_state", 1, 0)
        if self._near is not None and stamp is not None:
            self._near.put(key, value, stamp)
        return bool(value == "1")

    async def _near_values(self, kind: str, near_keys: list[str], part: object = "") -> list[object] | None:
        """The near cache's values of every key, after a fence (``near_cache.py``), or None: ask Redis."""
        near = self._near
        if near is None or not near.usable:
            return None
        if any(near.get(key, part) is None for key in near_keys):
            near.count(kind, False)
            return None
        # Looked at again after the fence: an invalidation it flushed out has dropped the key.
        values = [near.get(key, part) for key in near_keys] if await near.fence() and self.trusted else []
        hit = bool(values) and all(value is not None for value in values)
        near.count(kind, hit)
        return values if hit else None

    async def fill_follow_state(self, follower_id: int, followee_id: int, following: bool, seen: str) -> None:
        await self._try(
            lambda: self._fill(
                keys=[keys.epoch(follower_id), keys.follow_state(follower_id, followee_id)],
                args=[seen, "1" if following else "0", self._ttl],
            )
        )

    @staticmethod
    def _sides(follower_id: int, followee_id: int) -> list[tuple[int, str, Direction, int]]:
        """Each user's slot of an edge: (owner, its follow-state key, the list holding the other,
        the other). The followee's slot holds no state of the edge, so its state key is its epoch."""
        return [
            (follower_id, keys.follow_state(follower_id, followee_id), Direction.FOLLOWING, followee_id),
            (followee_id, keys.epoch(followee_id), Direction.FOLLOWERS, follower_id),
        ]

    async def _in_both_slots(self, calls: list[Callable[[], Awaitable[object]]], *, essential: bool = False) -> bool:
        results = await asyncio.gather(*(self._try(call, essential=essential) for call in calls))
        return all(ok for ok, _ in results)

    async def _on_both_sides(
        self,
        script: AsyncScript,
        follower_id: int,
        followee_id: int,
        args: Callable[[int], list[str | int]],
        *,
        essential: bool = False,
    ) -> bool:
        """Run an edge script (KEYS as ``scripts.WRITE_EDGE``) in each user's slot. ``args(other)``
        builds the ARGV for the side whose list holds ``other``."""

        def edge_keys(owner: int, state_key: str, direction: Direction, other: int) -> list[str]:
            return [
                keys.epoch(owner),
                state_key,
                keys.list_key(direction, owner),
                keys.list_tombstones(direction, owner),
                keys.relationship(owner, other),
                keys.suggestions(owner),
            ]

        sides = self._sides(follower_id, followee_id)
        redis = self._redis
        if isinstance(redis, Redis):  # one node: both slots' calls in one write, one round trip
            calls = [(edge_keys(*side), args(side[3])) for side in sides]
            ok, _ = await self._try(lambda: script_calls(redis, script, calls), essential=essential)
            return ok

        def call(side: tuple[int, str, Direction, int]) -> Callable[[], Awaitable[object]]:
            return lambda: script(keys=edge_keys(*side), args=args(side[3]))

        return await self._in_both_slots([call(side) for side in sides], essential=essential)

    def _dropping(self, owner: int, *stale: str) -> Callable[[], Awaitable[object]]:
        return lambda: self._drop(keys=[keys.epoch(owner), *stale])

    async def write_edge(self, follower_id: int, followee_id: int, at_us: int | None, following: bool) -> bool:
        """Write-through after a committed follow (``following``) or unfollow of the edge made at ``at_us``.

        ``at_us`` is None for an unfollow that found no edge: only the follow state is dropped.
        False: not settled (owed; the caller must not acknowledge before ``CacheLease.settle_failed``).
        """
        add = "1" if following else "0"
        now_ms = now_us() // 1000

        def args(other: int) -> list[str | int]:
            member = "" if at_us is None else Edge(other, at_us).position
            return [add, member, self._list_limit, now_ms, TOMBSTONE_MS]

        if not await self._on_both_sides(self._write_edge, follower_id, followee_id, args, essential=True):
            self._owe(follower_id, followee_id)
            return False
        return await self._owed_delivered(follower_id, followee_id)

    async def _owed_delivered(self, a: int, b: int) -> bool:
        """After a write-through of the pair: if an earlier one failed and its invalidation is still
        owed, deliver it now, since this write is acknowledged only once the pair is settled (a
        retry of a write that committed but was not acknowledged finds nothing to change, and its
        own write-through would leave the first one's stale entries in place)."""
        owed = self._pending.get((a, b))
        if owed is None:
            return True
        if not await self.invalidate_edge(a, b, essential=True):
            return False
        if self._pending.get((a, b)) == owed:
            del self._pending[(a, b)]
        return True

    async def touch_pair(self, a: int, b: int, *, essential: bool = True) -> bool:
        """Write-through after a committed request or block change between ``a`` and ``b``.
        The consumer passes ``essential=False``: it has the stream to repeat from."""
        calls = [
            self._dropping(a, keys.relationship(a, b), keys.suggestions(a)),
            self._dropping(b, keys.relationship(b, a), keys.suggestions(b)),
        ]
        if not await self._in_both_slots(calls, essential=essential):
            self._owe(a, b)
            return False
        return await self._owed_delivered(a, b) if essential else True

    async def repair_edge(self, follower_id: int, followee_id: int, at_us: int, following: bool) -> bool:
        """Delete any cached entry that disagrees with a committed change (run by the consumer)."""
        state = "1" if following else "0"
        return await self._on_both_sides(
            self._repair, follower_id, followee_id, lambda other: [state, Edge(other, at_us).position]
        )

    async def invalidate_edge(self, follower_id: int, followee_id: int, *, essential: bool = False) -> bool:
        """Drop every entry a change between the two users may have made stale, in both slots
        (tombstones are kept: they only ever stop a stale add). ``(u, u)`` is a privacy change of u.
        ``essential``: tried even while the breaker is open (a write waits on it)."""
        if follower_id == followee_id:
            ok, _ = await self._try(self._dropping_privacy(follower_id), essential=essential)
            return ok
        calls = [
            self._dropping(
                owner,
                state_key,
                keys.list_key(direction, owner),
                keys.relationship(owner, other),
                keys.suggestions(owner),
                keys.privacy(owner),
            )
            for owner, state_key, direction, other in self._sides(follower_id, followee_id)
        ]
        return await self._in_both_slots(calls, essential=essential)

    # -- relationships, privacy, suggestions ----------------------------------------------

    async def read_relationships(
        self, actor_id: int, target_ids: Sequence[int]
    ) -> tuple[dict[int, Relationship], str | None]:
        """The cached entries (one round trip: all keys share the actor's slot) and the actor's
        epoch to guard a fill of the rest (None: do not fill)."""
        if not target_ids:
            return {}, None
        if not self.trusted:
            self._count("relationships", 0, len(target_ids))
            return {}, None
        rel_keys = [keys.relationship(actor_id, t) for t in target_ids]
        near = await self._near_values("relationships", rel_keys)
        if near is not None:  # every one in this process, after a fence: nothing to fill
            self._count("relationships", len(target_ids), 0)
            return {t: Relationship.decode(str(v)) for t, v in zip(target_ids, near, strict=True)}, None
        stamps = [self._near.stamp(key) for key in rel_keys] if self._near is not None else []
        ok, replies = await self._try(
            lambda: self._read(lambda pipe: pipe.execute_command("MGET", keys.epoch(actor_id), *rel_keys))
        )
        if not ok or replies is None:
            self._count("relationships", 0, len(target_ids))
            return {}, None
        values: list[str | None] = replies[0]  # type: ignore[assignment]  # MGET's reply
        found = {t: Relationship.decode(str(v)) for t, v in zip(target_ids, values[1:], strict=True) if v}
        self._count("relationships", len(found), len(target_ids) - len(found))
        if self._near is not None:
            for key, value, stamp in zip(rel_keys, values[1:], stamps, strict=True):
                if value:
                    self._near.put(key, value, stamp)
        if values[0] is None:  # never guard a fill with a missing epoch (scripts._BUMP): make one
            return found, await self.epoch(actor_id)
        return found, str(values[0])

    async def fill_relationships(self, actor_id: int, found: dict[int, Relationship], seen: str) -> None:
        if not found:
            return
        rel_keys = [keys.relationship(actor_id, t) for t in found]
        values = [r.encode() for r in found.values()]
        await self._try(
            lambda: self._fill_many(keys=[keys.epoch(actor_id), *rel_keys], args=[seen, self._ttl, *values])
        )

    async def get_private(self, user_id: int) -> bool | None:
        if not self.trusted:
            self._count("privacy", 0, 1)
            return None
        ok, values = await self._try(lambda: self._read(lambda pipe: pipe.get(keys.privacy(user_id))))
        value = values[0] if ok and values is not None else None
        if value is None:
            self._count("privacy", 0, 1)
            return None
        self._count("privacy", 1, 0)
        return bool(value == "1")

    async def fill_private(self, user_id: int, private: bool, seen: str) -> None:
        await self._try(
            lambda: self._fill(
                keys=[keys.privacy_epoch(user_id), keys.privacy(user_id)], args=[seen, int(private), self._ttl]
            )
        )

    def _dropping_privacy(self, user_id: int) -> Callable[[], Awaitable[object]]:
        return lambda: self._drop(keys=[keys.privacy_epoch(user_id), keys.privacy(user_id)])

    async def drop_private(self, user_id: int, *, essential: bool = True) -> bool:
        """Write-through after a committed privacy change; False: not settled (owed)."""
        ok, _ = await self._try(self._dropping_privacy(user_id), essential=essential)
        if not ok:
            self._owe(user_id, user_id)
            return False
        return await self._owed_delivered(user_id, user_id) if essential else True

    async def get_suggestions(self, user_id: int) -> str | None:
        if not self.trusted:
            return None
        ok, values = await self._try(lambda: self._read(lambda pipe: pipe.get(keys.suggestions(user_id))))
        value = values[0] if ok and values is not None else None
        return str(value) if value is not None else None

    async def fill_suggestions(self, user_id: int, value: str, seen: str, ttl_seconds: int) -> None:
        await self._try(
            lambda: self._fill(keys=[keys.epoch(user_id), keys.suggestions(user_id)], args=[seen, value, ttl_seconds])
        )

    # -- adjacency lists ----------------------------------------------------------------------

    async def read_list(self, direction: Direction, user_id: int, limit: int, after: Cursor | None) -> EdgePage | None:
        """A page from a cached whole list, or None on a miss."""
        if not self.trusted:
            self._count("lists", 0, 1)
            return None
        key = keys.list_key(direction, user_id)
        if after is None:  # first pages only: the near cache keeps them by page size
            near = await self._near_values("lists", [key], limit)
            if near is not None:
                self._count("lists", 1, 0)
                return near[0]  # type: ignore[return-value]  # what put() kept under (key, limit)
        stamp = self._near.stamp(key) if self._near is not None and after is None else None
        start = "+" if after is None else f"({after.position}"
        ok, replies = await self._try(
            lambda: self._read(
                lambda pipe: pipe.zrange(
                    keys.list_key(direction, user_id),
                    start,
                    f"[{SENTINEL}",
                    desc=True,
                    bylex=True,
                    offset=0,
                    num=limit + 1,
                )
            )
        )
        members: list[str] | None = replies[0] if ok and replies is not None else None  # type: ignore[assignment]
        if not members:
            self._count("lists", 0, 1)
            return None
        self._count("lists", 1, 0)
        entries = [Edge.from_position(str(m)) for m in members if m != SENTINEL]
        page = EdgePage(entries=entries[:limit], has_more=len(entries) > limit)
        if self._near is not None and stamp is not None:
            self._near.put(key, page, stamp, limit)
        return page

    async def fill_list(self, direction: Direction, user_id: int, seen: str, entries: AsyncIterator[Edge]) -> bool:
        """Load a whole list into a temporary key, then swap it in only if no write came between."""
        tmp = keys.list_tmp(direction, user_id, secrets.token_hex(4))
        batch: list[str] = [SENTINEL]
        count = 0
        try:
            async for edge in entries:
                batch.append(edge.position)
                count += 1
                if count > self._list_limit:
                    return False  # too long to cache whole; the finally drops what was loaded
                if len(batch) >= FILL_CHUNK:
                    if not await self._add_members(tmp, batch):
                        return False
                    batch = []
            if batch and not await self._add_members(tmp, batch):
                return False
            ok, done = await self._try(
                lambda: self._commit_list(
                    keys=[keys.epoch(user_id), tmp, keys.list_key(direction, user_id)], args=[seen, self._ttl]
                )
            )
            return bool(ok and done)
        finally:
            if count > self._list_limit:
                await self._try(lambda: self._redis.delete(tmp))

    async def _add_members(self, tmp: str, members: list[str]) -> bool:
        async def add() -> None:
            await self._redis.zadd(tmp, dict.fromkeys(members, 0))
            await self._redis.expire(tmp, 300)

        ok, _ = await self._try(add)
        return ok

    # -- counts ----------------------------------------------------------------------------

    async def get_counts(self, user_ids: Sequence[int]) -> dict[int, Counts]:
        """Cached counts of those users that are cached (one pipelined round trip per node)."""
        if not user_ids:
            return {}
        if not self.trusted:
            self._count("counts", 0, len(user_ids))
            return {}
        count_keys = [keys.counts(user_id) for user_id in user_ids]
        near = await self._near_values("counts", count_keys)
        if near is not None:
            self._count("counts", len(user_ids), 0)
            return dict(zip(user_ids, near, strict=True))  # type: ignore[arg-type]  # Counts, as put() kept them
        stamps = [self._near.stamp(key) for key in count_keys] if self._near is not None else []

        def queue(pipe: object) -> None:
            for user_id in user_ids:
                pipe.hmget(keys.counts(user_id), ["fl", "fg", "v"])  # type: ignore[attr-defined]

        _, replies = await self._try(lambda: self._read(queue))
        rows: list[list[str | None]] | None = replies  # type: ignore[assignment]  # HMGET's replies
        found: dict[int, Counts] = {}
        for user_id, row in zip(user_ids, rows or [], strict=False):
            if row and None not in row:
                found[user_id] = Counts(int(row[0] or 0), int(row[1] or 0), int(row[2] or 0))
        if self._near is not None and stamps:
            for user_id, key, stamp in zip(user_ids, count_keys, stamps, strict=True):
                if user_id in found:
                    self._near.put(key, found[user_id], stamp)
        self._count("counts", len(found), len(user_ids) - len(found))
        return found

    async def set_counts(self, user_id: int, counts: Counts) -> bool:
        ok, _ = await self._try(
            lambda: self._set_counts(
                keys=[keys.counts(user_id)],
                args=[counts.followers, counts.following, counts.version, self._ttl],
            )
        )
        return ok

    async def deliver_owed(self) -> None:
        """Stop retrying in the background and try every owed invalidation once more, now; what
        still fails is logged and forgotten (the counters consumer's stream repairs cover it)."""
        if self._flusher is not None:
            self._flusher.cancel()
            await asyncio.gather(self._flusher, return_exceptions=True)
        self._down_until = 0.0
        for pair in list(self._pending):
            if await self.invalidate_edge(*pair):
                del self._pending[pair]
        if self._pending:
            log.warning("redis_invalidations_dropped_at_shutdown", count=len(self._pending))
            self._pending.clear()
            self._dropped = True

    async def aclose(self) -> None:
        """Deliver owed invalidations if Redis answers now (one try), then close the client."""
        await self.deliver_owed()
        if self._near is not None:
            await self._near.aclose()
        await self._redis.aclose()
