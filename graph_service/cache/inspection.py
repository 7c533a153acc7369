"""The graph cache's raw entries, as an operator's check reads and repairs them.

``GraphCache`` serves reads and never shows what it holds; ``fsck`` needs the opposite: every
entry of some users (or of all), its raw value, and a way to remove one. The key layout is
``cache/keys.py``'s; an entry ``fsck`` does not judge (epochs, tombstones, fills in progress,
suggestions) is never listed.

Deleting an entry is always safe: the cache is a copy of DynamoDB, a missing entry is a miss, and
the next reader refills it from a strongly consistent read. The delete runs the same ``DROP``
script as a write-through, which also bumps the entry's epoch, so a fill that read the store
before the delete refuses itself instead of putting the deleted value back.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Collection, Sequence
from dataclasses import dataclass
from enum import Enum

from graph_service.cache import keys, scripts
from graph_service.cache.list_entries import SENTINEL
from graph_service.domain.models import Direction
from graph_service.redis_client.connect import AnyRedis

__all__ = ["LISTS", "LIST_COMPLETE", "PER_USER_SCANS", "CacheInspector", "CachedEntry", "EntryKind", "Raw", "parse_key"]

LIST_COMPLETE = SENTINEL
"""The member every cached whole list holds (it marks the list complete, so empty lists cache too)."""

PER_USER_SCANS = 32
"""Up to this many users, each user's keys are found by a SCAN matching its hash tag (Redis
filters, little crosses the network); above it one SCAN of every ``sg:`` key is cheaper."""


class EntryKind(Enum):
    FOLLOW_STATE = "fs"
    FOLLOWERS_LIST = "fl"
    FOLLOWING_LIST = "fg"
    COUNTS = "cnt"
    RELATIONSHIP = "rl"
    MUTE = "mu"
    PRIVACY = "pv"
    ACCOUNT_STATE = "st"


LISTS = {EntryKind.FOLLOWERS_LIST: Direction.FOLLOWERS, EntryKind.FOLLOWING_LIST: Direction.FOLLOWING}
_KEY = re.compile(rf"^{keys.PREFIX}:\{{(\d+)\}}:(?:(fs|rl|mu):(\d+)|(fl|fg|cnt|pv|st))$")


@dataclass(frozen=True, slots=True)
class CachedEntry:
    key: str
    kind: EntryKind
    user: int
    """The user whose slot holds the entry (the follower of ``fs``, the actor of ``rl`` and ``mu``)."""
    other: int | None = None
    """The followee of ``fs``, the target of ``rl`` and ``mu``."""


def parse_key(key: str) -> CachedEntry | None:
    """The entry a key holds, or None for keys this module does not list."""
    match = _KEY.match(key)
    if match is None:
        return None
    user, pair_kind, other, kind = match.groups()
    if pair_kind is not None:
        return CachedEntry(key, EntryKind(pair_kind), int(user), int(other))
    return CachedEntry(key, EntryKind(kind), int(user))


Raw = str | list[str] | None
"""GET's string (fs, rl, mu, pv); a list's members, its ``!`` marker included (fl, fg); the counts
hash as ``[fl, fg, v]`` (cnt); None when the entry is not there (any more)."""


class CacheInspector:
    """Lists, reads and drops raw graph cache entries (single node or Cluster)."""

    def __init__(self, redis: AnyRedis) -> None:
        self._redis = redis
        self._drop = redis.register_script(scripts.DROP)

    async def entries(
        self, users: Collection[int] | None = None, *, batch: int = 500
    ) -> AsyncIterator[list[CachedEntry]]:
        """The entries of ``users`` (None: every user), ``batch`` at a time, each key once."""
        patterns = [f"{keys.PREFIX}:*"]
        if users is not None and len(users) <= PER_USER_SCANS:
            patterns = [f"{keys.PREFIX}:{{{u}}}:*" for u in sorted(set(users))]
        wanted = None if users is None else set(users)
        found: list[CachedEntry] = []
        seen: set[str] = set()  # a SCAN may return a key twice
        for pattern in patterns:
            async for key in self._redis.scan_iter(match=pattern, count=1000):
                entry = parse_key(str(key))
                if entry is None or key in seen or (wanted is not None and entry.user not in wanted):
                    continue
                seen.add(entry.key)
                found.append(entry)
                if len(found) >= batch:
                    yield found
                    found = []
        if found:
            yield found

    async def read(self, entries: Sequence[CachedEntry]) -> list[Raw]:
        """The raw value of each entry, in one pipelined round trip (per node of a Cluster)."""
        if not entries:
            return []
        pipe = self._redis.pipeline(transaction=False)
        for entry in entries:
            if entry.kind in LISTS:
                pipe.zrange(entry.key, 0, -1)
            elif entry.kind is EntryKind.COUNTS:
                pipe.hmget(entry.key, ["fl", "fg", "v"])
            else:
                pipe.get(entry.key)
        values = await pipe.execute()
        return [_raw(entry, value) for entry, value in zip(entries, values, strict=True)]

    async def drop(self, entry: CachedEntry) -> None:
        """Delete the entry (and bump its epoch, see the module's docstring)."""
        if entry.kind is EntryKind.COUNTS:
            # Counts have no epoch: their fills are guarded by the users table's version instead.
            await self._redis.delete(entry.key)
            return
        settings = entry.kind in (EntryKind.PRIVACY, EntryKind.ACCOUNT_STATE)
        epoch = keys.privacy_epoch(entry.user) if settings else keys.epoch(entry.user)
        await self._drop(keys=[epoch, entry.key])


def _raw(entry: CachedEntry, value: object) -> Raw:
    if entry.kind in LISTS:
        members = [str(m) for m in value] if isinstance(value, list) else []
        return members or None  # a sorted set that is not there reads as empty
    if entry.kind is EntryKind.COUNTS:
        row = value if isinstance(value, list) else []
        return None if len(row) != 3 or None in row else [str(v) for v in row]
    return None if value is None else str(value)
