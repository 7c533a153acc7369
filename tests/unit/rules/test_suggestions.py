"""SuggestFollows' ranking, sampling and caching, on the in-memory graph and suggestion cache."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace

from graph_service.domain.models import Cursor, Direction, EdgePage
from graph_service.entrypoints.rule_limits import rule_limits
from graph_service.rules.suggestions import MAX_SUGGESTIONS, Suggester, Suggestion
from graph_service.settings import Settings
from tests.support.fakes.accounts import FakeAccounts
from tests.support.fakes.graph import FakeGraph
from tests.support.fakes.suggestion_cache import FakeSuggestionCache

SETTINGS = Settings(page_token_secret="unit-test-secret")


class CountingLists:
    """A ``ListReads`` that records whose lists were read through it."""

    def __init__(self, graph: FakeGraph) -> None:
        self._graph = graph
        self.read: Counter[int] = Counter()

    async def list_edges(self, direction: Direction, user_id: int, limit: int, after: Cursor | None) -> EdgePage:
        self.read[user_id] += 1
        return await self._graph.list_edges(direction, user_id, limit, after)


def follow(graph: FakeGraph, follower: int, followee: int, at: int) -> None:
    graph.edges[(follower, followee)] = at


async def test_second_degree_accounts_are_ranked_by_how_many_followees_follow_them() -> None:
    graph = FakeGraph()
    for at, followee in enumerate((10, 11, 12), start=1):
        follow(graph, 1, followee, at)
    for followee, theirs in {10: (20, 21, 22), 11: (21, 22, 1), 12: (22, 23)}.items():
        for at, account in enumerate(theirs, start=1):
            follow(graph, followee, account, at)
    found = await Suggester(graph, graph, graph, None, rule_limits(SETTINGS), FakeAccounts(graph)).suggest(1, 10)
    assert found == [
        Suggestion(22, 3 / 3, 3),
        Suggestion(21, 2 / 3, 2),
        Suggestion(20, 1 / 3, 1),  # ties by ascending ID
        Suggestion(23, 1 / 3, 1),
    ]  # never the user itself (followed by 11)
    assert (
        await Suggester(graph, graph, graph, None, rule_limits(SETTINGS), FakeAccounts(graph)).suggest(1, 2)
    ) == found[:2]


async def test_accounts_followed_requested_or_blocked_either_way_are_never_suggested() -> None:
    graph = FakeGraph()
    follow(graph, 1, 10, 1)
    for at, account in enumerate((20, 21, 22, 23, 24), start=1):
        follow(graph, 10, account, at)
    follow(graph, 1, 20, 2)  # followed already
    graph.requests[(1, 21)] = 3  # asked already
    graph.blocks[(1, 22)] = 4  # blocked by the user
    graph.blocks[(23, 1)] = 5  # blocks the user
    found = await Suggester(graph, graph, graph, None, rule_limits(SETTINGS), FakeAccounts(graph)).suggest(1, 10)
    assert [s.user_id for s in found] == [24]


async def test_only_recent_followees_and_their_recent_followees_are_looked_at() -> None:
    graph = FakeGraph()
    for at, followee in enumerate((10, 11, 12), start=1):  # 12 and 11 are the two most recent
        follow(graph, 1, followee, at)
    for followee in (10, 11, 12):
        for at, account in enumerate((100 + followee, 200 + followee, 300 + followee), start=1):
            follow(graph, followee, account, at)
    settings = replace(SETTINGS, suggest_followee_sample=2, suggest_per_followee=2)
    own, bulk = CountingLists(graph), CountingLists(graph)
    found = await Suggester(own, bulk, graph, None, rule_limits(settings), FakeAccounts(graph)).suggest(1, 10)
    assert sorted(s.user_id for s in found) == [211, 212, 311, 312]
    assert own.read == Counter({1: 1})  # the user's own list, worth caching whole
    assert bulk.read == Counter({11: 1, 12: 1})  # the followees' lists: read without whole-list fills


async def test_no_more_than_the_maximum_are_kept_even_from_a_big_neighbourhood() -> None:
    graph = FakeGraph()
    follow(graph, 1, 10, 1)
    for account in range(1000, 1300):
        follow(graph, 10, account, account)
    found = await Suggester(
        graph, graph, graph, None, rule_limits(replace(SETTINGS, suggest_per_followee=300)), FakeAccounts(graph)
    ).suggest(1, 100)
    assert len(found) == MAX_SUGGESTIONS
    assert [s.user_id for s in found] == list(range(1000, 1100))


async def test_a_ranking_is_kept_and_served_until_a_write_of_the_user_drops_it() -> None:
    graph, cache = FakeGraph(), FakeSuggestionCache()
    follow(graph, 1, 10, 1)
    follow(graph, 10, 20, 1)
    suggester = Suggester(graph, graph, graph, cache, rule_limits(SETTINGS), FakeAccounts(graph))
    assert [s.user_id for s in await suggester.suggest(1, 5)] == [20]
    assert json.loads(cache.values[1]) == [[20, 1.0, 1]]
    follow(graph, 10, 21, 2)  # another account's write: the kept ranking is served until it expires
    assert [s.user_id for s in await suggester.suggest(1, 5)] == [20]
    cache.bump(1)  # the user's own write drops it
    assert [s.user_id for s in await suggester.suggest(1, 5)] == [20, 21]  # a tie: ascending ID


async def test_a_ranking_computed_across_a_write_is_not_kept() -> None:
    graph, cache = FakeGraph(), FakeSuggestionCache()
    follow(graph, 1, 10, 1)
    follow(graph, 10, 20, 1)

    class WriteDuringRanking(CountingLists):
        async def list_edges(self, direction: Direction, user_id: int, limit: int, after: Cursor | None) -> EdgePage:
            cache.bump(1)  # a write of the user lands while its ranking is computed
            return await super().list_edges(direction, user_id, limit, after)

    suggester = Suggester(WriteDuringRanking(graph), graph, graph, cache, rule_limits(SETTINGS), FakeAccounts(graph))
    assert [s.user_id for s in await suggester.suggest(1, 5)] == [20]
    assert 1 not in cache.values


async def test_without_a_cache_every_call_ranks_afresh() -> None:
    graph = FakeGraph()
    follow(graph, 1, 10, 1)
    follow(graph, 10, 20, 1)
    suggester = Suggester(graph, graph, graph, None, rule_limits(SETTINGS), FakeAccounts(graph))
    assert [s.user_id for s in await suggester.suggest(1, 5)] == [20]
    follow(graph, 10, 21, 2)
    assert [s.user_id for s in await suggester.suggest(1, 5)] == [20, 21]  # a tie: ascending ID
    assert await suggester.suggest(2, 5) == []  # follows nobody: nothing to rank


async def test_with_the_cache_unreachable_every_call_ranks_afresh_and_keeps_nothing() -> None:
    graph, cache = FakeGraph(), FakeSuggestionCache(down=True)
    follow(graph, 1, 10, 1)
    follow(graph, 10, 20, 1)
    suggester = Suggester(graph, graph, graph, cache, rule_limits(SETTINGS), FakeAccounts(graph))
    assert [s.user_id for s in await suggester.suggest(1, 5)] == [20]
    follow(graph, 10, 21, 2)
    assert [s.user_id for s in await suggester.suggest(1, 5)] == [20, 21]
    assert cache.values == {}
