"""ListKnownFollowers and ListMutualFollows iterate the smaller side, on the in-memory graph with a
counting proxy in front of its reads (no server: what is tested is which reads are made)."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

from graph_service.cache.write_through import NoGraphCache
from graph_service.domain.models import Counts, Cursor, Direction, Edge, EdgePage
from graph_service.entrypoints.rule_limits import rule_limits
from graph_service.limits.follow_budget import Unlimited
from graph_service.rules.graph import GraphRules, graph_rules
from graph_service.rules.suggestions import Suggester
from graph_service.settings import Settings
from tests.support.fakes.accounts import FakeAccounts
from tests.support.fakes.graph import FakeGraph

SETTINGS = Settings(page_token_secret="unit-test-secret")


class CountingReads:
    """Passes every read to the graph; records the lists read and the lookup sizes."""

    def __init__(self, inner: FakeGraph) -> None:
        self._inner = inner
        self.listed: Counter[tuple[Direction, int]] = Counter()
        self.found: list[tuple[Direction, int, int]] = []

    def reset(self) -> None:
        self.listed.clear()
        self.found.clear()

    async def list_edges(self, direction: Direction, user_id: int, limit: int, after: Cursor | None) -> EdgePage:
        self.listed[(direction, user_id)] += 1
        return await self._inner.list_edges(direction, user_id, limit, after)

    async def find_edges(self, direction: Direction, user_id: int, others: Sequence[int]) -> dict[int, int]:
        self.found.append((direction, user_id, len(others)))
        return await self._inner.find_edges(direction, user_id, others)

    async def get_counts(self, user_ids: Sequence[int]) -> dict[int, Counts]:
        return await self._inner.get_counts(user_ids)

    async def is_following(self, follower_id: int, followee_id: int) -> bool:
        return await self._inner.is_following(follower_id, followee_id)

    async def list_requests(self, user_id: int, limit: int, after: Cursor | None) -> EdgePage:
        return await self._inner.list_requests(user_id, limit, after)

    async def is_private(self, user_id: int) -> bool:
        return await self._inner.is_private(user_id)


def make_service(graph: FakeGraph, reads: CountingReads, settings: Settings) -> GraphRules:
    limits = rule_limits(settings)
    accounts = FakeAccounts(graph)
    suggester = Suggester(reads, reads, graph, None, limits, accounts)
    return graph_rules(
        graph,
        NoGraphCache(),
        reads,
        graph,
        suggester,
        limits,
        budget=Unlimited(),
        mutes=graph,
        states=accounts,
        accounts=accounts,
    )


async def test_candidate_load_gives_up_past_the_limit_when_counts_lag() -> None:
    """The counters say the viewer follows 1 (the consumer lags) but it follows 5, above the
    candidate limit of 3: the load stops past the limit and the page comes from walking the
    followers instead, still exact."""
    graph = FakeGraph()
    proxy = CountingReads(graph)
    service = make_service(graph, proxy, replace(SETTINGS, intersection_candidate_limit=3))
    user, viewer = 1, 2
    for fan in range(10, 20):
        await service.follows.follow(fan, user)
    await service.follows.follow(viewer, 10)
    graph.settle_counts()
    counted = {u: (c.followers, c.following) for u, c in await service.queries.batch_get_counts([user, viewer])}
    assert counted == {user: (10, 0), viewer: (0, 1)}
    for known in (11, 12, 13, 14):  # not counted: the counters lag
        await service.follows.follow(viewer, known)
    proxy.reset()
    page = await service.known.list_known_followers(viewer, user, 0, "")
    assert [e.user_id for e in page.entries] == [14, 13, 12, 11, 10]
    assert page.next_page_token == ""
    assert proxy.listed[(Direction.FOLLOWING, viewer)] == 1  # tried the candidates once, gave up
    assert proxy.listed[(Direction.FOLLOWERS, user)] >= 1  # then walked the followers


async def service_walk(fetch: Callable[[str], Awaitable[Any]]) -> list[Edge]:
    entries: list[Edge] = []
    token = ""
    while True:
        page = await fetch(token)
        entries.extend(page.entries)
        token = page.next_page_token
        if not token:
            return entries
        assert page.entries


async def test_intersections_iterate_only_the_smaller_side() -> None:
    """With 1,100 (or 600) entries on one side, more than one load (or scan) batch, and a handful on the
    other, only the handful is ever listed, and lookups carry no more IDs than the small side has."""
    rng = random.Random(33)
    graph = FakeGraph()
    proxy = CountingReads(graph)
    service = make_service(graph, proxy, SETTINGS)
    user, viewer, big_viewer, small_user = 1, 2, 3, 4
    crowd = list(range(100_001, 101_101))  # they follow user
    followed = rng.sample(crowd, 600)  # big_viewer follows them
    viewer_knows = rng.sample(crowd, 5)
    small_user_fans = [*rng.sample(followed, 5), 300_001, 300_002, 300_003]
    user_follows = [*rng.sample(crowd, 3), 400_001, 400_002]
    big_viewer_fans = [*rng.sample(followed, 2), 500_001, 500_002]
    pairs = [(a, user) for a in crowd] + [(big_viewer, a) for a in followed]
    pairs += [(viewer, a) for a in viewer_knows] + [(f, small_user) for f in small_user_fans]
    pairs += [(user, a) for a in user_follows] + [(f, big_viewer) for f in big_viewer_fans]
    rng.shuffle(pairs)
    for a, b in pairs:
        await service.follows.follow(a, b)
    graph.settle_counts()

    want = {user: (1100, 5), viewer: (0, 5), big_viewer: (4, 600), small_user: (8, 0)}
    counted = {u: (c.followers, c.following) for u, c in await service.queries.batch_get_counts(list(want))}
    assert counted == want

    async def expected(list_owner: int, ids: Iterable[int]) -> list[Edge]:
        found = await graph.find_edges(Direction.FOLLOWERS, list_owner, list(ids))
        return sorted((Edge(u, at) for u, at in found.items()), key=lambda e: e.position, reverse=True)

    cases = [
        # (what, call, the list that may be listed, the list never listed, lookups into, max lookup size, answer)
        (
            "known: viewer follows 5, user has 1,100 followers",
            lambda n, t: service.known.list_known_followers(viewer, user, n, t),
            (Direction.FOLLOWING, viewer),
            (Direction.FOLLOWERS, user),
            (Direction.FOLLOWERS, user),
            5,
            await expected(user, viewer_knows),
        ),
        (
            "known: viewer follows 600, user has 8 followers",
            lambda n, t: service.known.list_known_followers(big_viewer, small_user, n, t),
            (Direction.FOLLOWERS, small_user),
            (Direction.FOLLOWING, big_viewer),
            (Direction.FOLLOWING, big_viewer),
            8,
            await expected(small_user, small_user_fans[:5]),
        ),
        (
            "mutual: follows 5, 1,100 followers",
            lambda n, t: service.known.list_mutual_follows(user, n, t),
            (Direction.FOLLOWING, user),
            (Direction.FOLLOWERS, user),
            (Direction.FOLLOWERS, user),
            5,
            await expected(user, user_follows[:3]),
        ),
        (
            "mutual: follows 600, 4 followers",
            lambda n, t: service.known.list_mutual_follows(big_viewer, n, t),
            (Direction.FOLLOWERS, big_viewer),
            (Direction.FOLLOWING, big_viewer),
            (Direction.FOLLOWING, big_viewer),
            4,
            await expected(big_viewer, big_viewer_fans[:2]),
        ),
    ]
    for what, call, small, big, lookup, most, answer in cases:
        for size in (2, 0):
            proxy.reset()
            got = await service_walk(lambda t, call=call, size=size: call(size, t))
            assert got == answer, what
            assert proxy.listed[big] == 0, f"{what}: the big list {big} was listed {proxy.listed[big]} times"
            assert set(proxy.listed) == {small}, f"{what}: listed {dict(proxy.listed)}"
            assert proxy.found, what
            for direction, owner, n in proxy.found:
                assert (direction, owner) == lookup, f"{what}: looked up in {(direction, owner)}"
                assert n <= most, f"{what}: {n} IDs looked up at once (the small side has {most})"


async def test_a_page_token_holds_when_the_next_page_takes_the_other_path() -> None:
    """Both paths give one order (by when they followed the user), so a walk whose counts change
    between pages, and with them the side iterated, still returns every known follower once."""
    graph = FakeGraph()
    proxy = CountingReads(graph)
    service = make_service(graph, proxy, SETTINGS)
    user, viewer = 1, 2
    for fan in range(10, 30):
        await service.follows.follow(fan, user)
    known = [12, 17, 21, 25, 28]
    for fan in known:
        await service.follows.follow(viewer, fan)
    graph.settle_counts()  # viewer follows 5 < 20 followers: the candidate path
    first = await service.known.list_known_followers(viewer, user, 2, "")
    assert proxy.listed[(Direction.FOLLOWERS, user)] == 0
    graph.set_counts(viewer, Counts(following=500))  # now the viewer looks bigger: the follower walk
    proxy.reset()
    rest = await service_walk(
        lambda token: service.known.list_known_followers(viewer, user, 2, token or first.next_page_token)
    )
    assert proxy.listed[(Direction.FOLLOWERS, user)] >= 1
    assert [e.user_id for e in [*first.entries, *rest]] == sorted(
        known, key=lambda u: graph.edges[(u, user)], reverse=True
    )
