"""SuggestFollows: second-degree accounts ranked by how many of the user's followees follow them.

Bounded work: only the user's ``suggest_followee_sample`` most recent followees are looked at,
and of each only its ``suggest_per_followee`` most recent followees (at most 200 x 200 list
entries by default, read from the list caches where warm). Candidates are ranked by that count,
ties by ascending user ID; then, in ranked batches of 100, every candidate the user already
follows or has asked to follow, or that is blocked either way, is dropped (one relationship
lookup per batch) until ``MAX_SUGGESTIONS`` are found. An account out of the graph (deactivated or
deleted) is dropped when the suggestions are served, not when ranked.

The ranking is cached under the user's slot for ``suggest_cache_ttl_seconds``; every write
between the user and anyone (follow, request, block...) drops it, and the fill is guarded by
the user's epoch like every other fill.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass

from graph_service.domain.account_ports import AccountStates
from graph_service.domain.errors import InvalidLimit
from graph_service.domain.ids import require_id
from graph_service.domain.models import Direction
from graph_service.domain.ports import ListReads, RelationshipReads, SuggestionCache
from graph_service.rules.limits import RuleLimits

__all__ = ["DEFAULT_SUGGESTIONS", "MAX_SUGGESTIONS", "Suggester", "Suggestion"]

MAX_SUGGESTIONS = 100
DEFAULT_SUGGESTIONS = 20
"""Suggestions of a request that says 0."""
CHECK_BATCH = 100


@dataclass(frozen=True, slots=True)
class Suggestion:
    user_id: int
    score: float
    mutual_count: int


class Suggester:
    def __init__(
        self,
        lists: ListReads,
        bulk_lists: ListReads,
        relationships: RelationshipReads,
        cache: SuggestionCache | None,
        limits: RuleLimits,
        states: AccountStates,
    ) -> None:
        """``lists`` reads the user's own followees (a list worth caching whole); ``bulk_lists``
        reads each followee's followees once, so it must not start whole-list cache fills."""
        self._lists = lists
        self._bulk_lists = bulk_lists
        self._relationships = relationships
        self._cache = cache
        self._states = states
        self._sample = limits.suggest_followee_sample
        self._per_followee = limits.suggest_per_followee
        self._ttl = limits.suggest_cache_ttl_seconds

    async def suggest_follows(self, user_id: int, limit: int) -> list[Suggestion]:
        """SuggestFollows: ``limit`` 0 is the default, above ``MAX_SUGGESTIONS`` an error."""
        require_id(user_id, "user_id")
        if not 0 <= limit <= MAX_SUGGESTIONS:
            raise InvalidLimit(limit, MAX_SUGGESTIONS)
        return await self.suggest(user_id, limit or DEFAULT_SUGGESTIONS)

    async def suggest(self, user_id: int, limit: int) -> list[Suggestion]:
        """The ranking (cached, or made now), without the accounts out of the graph (SPEC §3b: never
        suggested; decided now, since an account may leave while a ranking is cached)."""
        states = await self._states.states([user_id])
        if not states[user_id].in_graph:
            return []
        ranked = await self._ranking(user_id)  # at most MAX_SUGGESTIONS
        present = await self._states.states([s.user_id for s in ranked]) if ranked else {}
        return [s for s in ranked if present[s.user_id].in_graph][:limit]

    async def _ranking(self, user_id: int) -> list[Suggestion]:
        if self._cache is None:
            return await self._rank(user_id)
        cached = await self._cache.get_suggestions(user_id)
        if cached is not None:
            return [Suggestion(u, s, n) for u, s, n in json.loads(cached)]
        seen = await self._cache.epoch(user_id)
        ranked = await self._rank(user_id)
        if seen is not None:
            value = json.dumps([[s.user_id, s.score, s.mutual_count] for s in ranked])
            await self._cache.fill_suggestions(user_id, value, seen, self._ttl)
        return ranked

    async def _rank(self, user_id: int) -> list[Suggestion]:
        followees = (await self._lists.list_edges(Direction.FOLLOWING, user_id, self._sample, None)).entries
        if not followees:
            return []
        pages = await asyncio.gather(
            *(self._bulk_lists.list_edges(Direction.FOLLOWING, f.user_id, self._per_followee, None) for f in followees)
        )
        tally = Counter(e.user_id for page in pages for e in page.entries if e.user_id != user_id)
        ranked = sorted(tally.items(), key=lambda item: (-item[1], item[0]))
        suggestions: list[Suggestion] = []
        for start in range(0, len(ranked), CHECK_BATCH):
            batch = ranked[start : start + CHECK_BATCH]
            relations = await self._relationships.relationships(user_id, [c for c, _ in batch])
            for candidate, mutual in batch:
                r = relations[candidate]
                if r.following or r.requested or r.blocking or r.blocked_by:
                    continue
                suggestions.append(Suggestion(candidate, mutual / len(followees), mutual))
                if len(suggestions) == MAX_SUGGESTIONS:
                    return suggestions
        return suggestions
