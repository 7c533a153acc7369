"""Cached entries against the store: each entry's raw value next to a strongly consistent read.

An entry can disagree for a moment on a healthy system: a write has committed and its
write-through is on its way (it deletes the entry or moves the list before the RPC returns), or
the counters consumer is about to set newer counts. So a disagreement is only a suspicion; it is
looked at again later (``Confirmer``), cache and store both re-read, and reported only if the
same disagreement is still there (for a list: some member still extra, or still missing).

``--repair-cache`` deletes each confirmed entry (``CacheInspector.drop``): the cache is a copy,
the next read refills it from DynamoDB, and the epoch bump stops a fill already in flight.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Collection, Mapping, Sequence

from graph_service.cache.inspection import LIST_COMPLETE, LISTS, CachedEntry, CacheInspector, EntryKind, Raw
from graph_service.domain.account_ports import AccountStates
from graph_service.domain.accounts import Lifecycle
from graph_service.domain.models import Cursor, Direction, Edge, Relationship
from graph_service.domain.times import now_us
from graph_service.operations.fsck_confirm import Confirmer
from graph_service.operations.fsck_report import Report, Violation
from graph_service.store.graph_store import DynamoGraphStore

__all__ = ["CacheChecker"]

KIND = {
    EntryKind.FOLLOW_STATE: "cache_follow_state",
    EntryKind.RELATIONSHIP: "cache_relationship",
    EntryKind.MUTE: "cache_mute",
    EntryKind.PRIVACY: "cache_privacy",
    EntryKind.ACCOUNT_STATE: "cache_account_state",
    EntryKind.COUNTS: "cache_counts",
    EntryKind.FOLLOWERS_LIST: "cache_list",
    EntryKind.FOLLOWING_LIST: "cache_list",
}
WALK_PAGE = 1000
SHOWN = 3  # members named in a list's report line

Signature = frozenset[tuple[str, ...]]
Finding = tuple[str, Signature]
"""(the report line's detail, what exactly disagrees: a later look must share some of it)."""


class CacheChecker:
    def __init__(
        self,
        inspector: CacheInspector,
        store: DynamoGraphStore,
        report: Report,
        later: Confirmer,
        *,
        repair: bool,
        accounts: AccountStates,
    ) -> None:
        self._inspector = inspector
        self._store = store
        self._accounts = accounts
        self._report = report
        self._later = later
        self._repair = repair
        self.checked = 0

    async def check(self, users: Collection[int] | None) -> None:
        """Every entry of ``users`` (None: of everyone)."""
        async for batch in self._inspector.entries(users):
            self.checked += len(batch)
            first = await self.compare(batch)
            if first:
                self._later.add(functools.partial(self._confirm, first))

    async def _confirm(self, first: dict[CachedEntry, Finding]) -> None:
        again = await self.compare(list(first))
        for entry, (detail, signature) in again.items():
            if not signature & first[entry][1]:
                continue  # what disagreed before has settled; something new is for another run
            if self._repair:
                await self._inspector.drop(entry)
            self._report.add(Violation(KIND[entry.kind], entry.user, entry.other, detail), repaired=self._repair)

    async def compare(self, entries: Sequence[CachedEntry]) -> dict[CachedEntry, Finding]:
        """The entries that disagree with the store now (the cache read first, then the store)."""
        raws = dict(zip(entries, await self._inspector.read(entries), strict=True))
        present: dict[CachedEntry, Raw] = {e: r for e, r in raws.items() if r is not None}
        results = await asyncio.gather(
            self._pairs(present),
            self._privacy(present),
            self._states(present),
            self._counts(present),
            *(self._list(e, r) for e, r in present.items() if e.kind in LISTS),
        )
        found: dict[CachedEntry, Finding] = {}
        for result in results:
            found.update(result)
        return found

    async def _pairs(self, present: Mapping[CachedEntry, Raw]) -> dict[CachedEntry, Finding]:
        by_actor: dict[int, list[CachedEntry]] = {}
        for entry in present:
            if entry.kind in (EntryKind.FOLLOW_STATE, EntryKind.RELATIONSHIP, EntryKind.MUTE):
                by_actor.setdefault(entry.user, []).append(entry)
        actors = list(by_actor)
        truths = await asyncio.gather(
            *(self._store.relationships(a, [e.other for e in by_actor[a] if e.other is not None]) for a in actors)
        )
        found: dict[CachedEntry, Finding] = {}
        for actor, truth in zip(actors, truths, strict=True):
            for entry in by_actor[actor]:
                relationship = truth.get(entry.other or 0, Relationship())
                raw = str(present[entry])
                if entry.kind is EntryKind.FOLLOW_STATE:
                    expected = "1" if relationship.following else "0"
                    said = "follows" if relationship.following else "does not follow"
                    detail = f"{entry.key} = {raw}; DynamoDB: {actor} {said} {entry.other}"
                elif entry.kind is EntryKind.MUTE:
                    expected = relationship.encode_mute()
                    detail = f"{entry.key} = {raw}; DynamoDB: {expected} (end in microseconds:notifications, - none)"
                    if _same_mute_now(raw, relationship):
                        continue
                else:
                    expected = relationship.encode()
                    detail = f"{entry.key} = {raw}; DynamoDB: {expected} ({', '.join(Relationship.FLAGS)})"
                if raw != expected:
                    found[entry] = (detail, frozenset({(raw, expected)}))
        return found

    async def _privacy(self, present: Mapping[CachedEntry, Raw]) -> dict[CachedEntry, Finding]:
        entries = [e for e in present if e.kind is EntryKind.PRIVACY]
        truths = await asyncio.gather(*(self._store.is_private_now(e.user) for e in entries))
        found: dict[CachedEntry, Finding] = {}
        for entry, private in zip(entries, truths, strict=True):
            raw, expected = str(present[entry]), "1" if private else "0"
            if raw != expected:
                said = "private" if private else "public"
                found[entry] = (f"{entry.key} = {raw}; DynamoDB: {said}", frozenset({(raw, expected)}))
        return found

    async def _states(self, present: Mapping[CachedEntry, Raw]) -> dict[CachedEntry, Finding]:
        """A cached lifecycle state must be the stored one (its job's progress within one state
        aside: ``d`` and ``D`` both hide the account alike, and so on, so only that is compared)."""
        entries = [e for e in present if e.kind is EntryKind.ACCOUNT_STATE]
        if not entries:
            return {}
        truth = await self._accounts.states([e.user for e in entries])
        found: dict[CachedEntry, Finding] = {}
        for entry in entries:
            raw, stored = str(present[entry]), truth[entry.user]
            try:
                cached = Lifecycle(raw)
            except ValueError:
                cached = None
            if cached is None or cached.in_graph != stored.in_graph or cached.deleted != stored.deleted:
                detail = f"{entry.key} = {raw}; DynamoDB: {stored.name} ({stored.value})"
                found[entry] = (detail, frozenset({(raw, stored.value)}))
        return found

    async def _counts(self, present: Mapping[CachedEntry, Raw]) -> dict[CachedEntry, Finding]:
        entries = [e for e in present if e.kind is EntryKind.COUNTS]
        if not entries:
            return {}
        truth = await self._store.get_counts([e.user for e in entries])
        found: dict[CachedEntry, Finding] = {}
        for entry in entries:
            followers, following, version = (str(v) for v in present[entry] or ())
            counts = truth[entry.user]
            if (followers, following) != (str(counts.followers), str(counts.following)):
                detail = (
                    f"{entry.key} = followers {followers}, following {following} (ver {version});"
                    f" users table: {counts.followers}, {counts.following} (ver {counts.version})"
                )
                found[entry] = (
                    detail,
                    frozenset({(followers, following, str(counts.followers), str(counts.following))}),
                )
        return found

    async def _list(self, entry: CachedEntry, raw: Raw) -> dict[CachedEntry, Finding]:
        direction = LISTS[entry.kind]
        cached = set(raw or ()) - {LIST_COMPLETE}
        truth = {e.position for e in await self._walk(direction, entry.user)}
        extra, missing = sorted(cached - truth), sorted(truth - cached)
        unmarked = LIST_COMPLETE not in (raw or ())
        if not extra and not missing and not unmarked:
            return {}
        parts = [f"{entry.key}: {len(cached)} cached, {len(truth)} in DynamoDB"]
        if extra:
            parts.append(f"not in DynamoDB: {_shown(extra)}")
        if missing:
            parts.append(f"missing: {_shown(missing)}")
        if unmarked:
            parts.append(f"no '{LIST_COMPLETE}' completeness marker")
        signature: set[tuple[str, ...]] = {("extra", m) for m in extra} | {("missing", m) for m in missing}
        if unmarked:
            signature.add(("unmarked",))
        return {entry: ("; ".join(parts), frozenset(signature))}

    async def _walk(self, direction: Direction, user_id: int) -> list[Edge]:
        entries: list[Edge] = []
        after: Cursor | None = None
        while True:
            page = await self._store.list_edges(direction, user_id, WALK_PAGE, after)
            entries += page.entries
            if not page.has_more or not page.entries:
                return entries
            after = page.entries[-1]


def _shown(members: list[str]) -> str:
    """A few members as ``user@at`` (as they are, if garbled), and how many more."""
    names = [_member(m) for m in members[:SHOWN]]
    more = f" and {len(members) - SHOWN} more" if len(members) > SHOWN else ""
    return ", ".join(names) + more


def _member(member: str) -> str:
    try:
        edge = Edge.from_position(member)
    except ValueError:
        return repr(member)
    return f"{edge.user_id}@{edge.at_us}"


def _same_mute_now(raw: str, truth: Relationship) -> bool:
    """The cached mute and the stored one say the same now: equal, or neither in force (a mute that
    has ended may be cached with its end after TTL reclaimed its items: it mutes nothing either way)."""
    try:
        cached = Relationship().with_mute(raw)
    except ValueError:
        return False  # not a value Relationship.encode_mute writes
    now = now_us()
    return cached.as_of(now).encode_mute() == truth.as_of(now).encode_mute()
