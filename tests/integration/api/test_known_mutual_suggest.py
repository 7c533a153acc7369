"""ListKnownFollowers, ListMutualFollows and SuggestFollows against the real servers.

Known and mutual followers are answered one of two ways, chosen from the counts (which only the
counters consumer writes): load the viewer's few followees and look them up in the user's
followers (the candidate path), or walk the user's followers and look each batch up in the
viewer's followees (the scan path). Every scenario settles the counts first, reads through a
server on the default settings, one forced onto the scan path (``intersection_candidate_limit=0``)
and one without a cache, and requires the same answer from all of them. The in-process test wraps
the store in a counting proxy to prove which list is iterated.

Suggestions are checked against a model of the graph: ranking, score, exclusions, limits, the
bounded sample, and the cache (kept until its TTL for second-degree changes, dropped at once by
the user's own writes).

The tests share the module's tables and servers (``tests/support/shared_service.py``), each on user
IDs of its own (``base`` plus the IDs it always used): those with the counters consumer on tables
with streams, the others on tables without (where no consumer runs).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, cast

import grpc
import pytest
from socialgraph.v1 import social_graph_pb2 as pb

from graph_service.domain.models import Direction, Edge
from graph_service.settings import Settings
from tests.support.graph_calls import Entry, Pair, error_info, whole_list
from tests.support.polling import eventually
from tests.support.runtimes import running_server, stub_for
from tests.support.seeding import seed_follows
from tests.support.shared_service import UserIds, module_fixtures, shared_service

if TYPE_CHECKING:
    # The async stub type exists only for type checkers; at run time the stub is the generated class.
    from socialgraph.v1.social_graph_pb2_grpc import SocialGraphServiceAsyncStub as Stub

pytestmark = pytest.mark.asyncio(loop_scope="module")  # the loop of the module's servers

INVALID = grpc.StatusCode.INVALID_ARGUMENT
Fetch = Callable[[str], Awaitable[tuple[list[Any], str]]]


# -- servers ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Servers:
    """Three servers on the same tables: default settings, forced scan path, and no cache."""

    default: Stub
    scan: Stub
    truth: Stub

    def all(self) -> dict[str, Stub]:
        return {"default": self.default, "scan": self.scan, "truth": self.truth}


@contextlib.asynccontextmanager
async def servers(settings: Settings, default: Stub) -> AsyncIterator[Servers]:
    scan_settings = replace(settings, intersection_candidate_limit=0)
    truth_settings = replace(settings, redis_url="")
    async with (
        running_server(scan_settings) as scan_server,
        running_server(truth_settings) as truth_server,
        stub_for(scan_server.port) as scan,
        stub_for(truth_server.port) as truth,
    ):
        yield Servers(default, cast("Stub", scan), cast("Stub", truth))


@dataclass(frozen=True)
class Service:
    settings: Settings
    servers: Servers


@contextlib.asynccontextmanager
async def module_service(dynamodb_local: str, redis_url: str, streams: bool) -> AsyncIterator[Service]:
    """The module's service: tables, the default server, and the scan and truth servers beside it."""
    async with (
        shared_service(dynamodb_local, redis_url, streams=streams) as shared,
        servers(shared.settings, cast("Stub", shared.stub)) as trio,
    ):
        yield Service(shared.settings, trio)


module_redis, streamed, plain, service, user_ids, settings, counters = module_fixtures(
    module_service, lambda service: service.settings
)
"""The module's services (``tests/support/shared_service.py``); ``stub`` and ``svc`` below are the
parts of the test's (``stub`` is the default server's)."""


@pytest.fixture
def stub(service: Service) -> Stub:
    return service.servers.default


@pytest.fixture
def svc(service: Service) -> Servers:
    return service.servers


@pytest.fixture
def base(user_ids: UserIds) -> int:
    """Added to every user ID of the test: IDs no other test of the module uses."""
    return user_ids.next_block()


# -- calls --------------------------------------------------------------------------------------------------


async def follow(stub: Stub, a: int, b: int) -> int:
    return int((await stub.Follow(pb.FollowRequest(follower_id=a, followee_id=b))).state)


async def seed(settings: Settings, pairs: Sequence[Pair]) -> None:
    """Follows written straight into the tables in batches, for a test's starting graph (read by
    nobody yet, so no cache entry can be stale): the Follow path is not what these tests are about,
    and DynamoDB Local writes batches several times faster than transactions."""
    await seed_follows(settings, pairs)


async def unfollow(stub: Stub, a: int, b: int) -> None:
    await stub.Unfollow(pb.UnfollowRequest(follower_id=a, followee_id=b))


def known(stub: Stub, viewer: int, user: int, size: int) -> Fetch:
    async def fetch(token: str) -> tuple[list[Any], str]:
        reply = await stub.ListKnownFollowers(
            pb.ListKnownFollowersRequest(viewer_id=viewer, user_id=user, page_size=size, page_token=token)
        )
        return [(e.user_id, e.followed_at.ToMicroseconds()) for e in reply.followers], reply.next_page_token

    return fetch


def mutual(stub: Stub, user: int, size: int) -> Fetch:
    async def fetch(token: str) -> tuple[list[Any], str]:
        reply = await stub.ListMutualFollows(
            pb.ListMutualFollowsRequest(user_id=user, page_size=size, page_token=token)
        )
        return [u.user_id for u in reply.users], reply.next_page_token

    return fetch


async def walk(
    fetches: Sequence[Fetch], size: int, between_pages: Callable[[], Awaitable[None]] | None = None
) -> list[Any]:
    """Every entry, page by page (page i from ``fetches[i % len]``), checking the AIP-158 shape of each page."""
    pages: list[list[Any]] = []
    token = ""
    while True:
        entries, token = await fetches[len(pages) % len(fetches)](token)
        pages.append(entries)
        assert len(entries) <= (size or 50), f"page {len(pages)} has {len(entries)} entries, page_size {size}"
        if not token:
            break
        assert entries, f"page {len(pages)} is empty but not the last"
        assert len(pages) < 5000, "the walk does not end"
        if between_pages is not None:
            await between_pages()
    flat = [e for page in pages for e in page]
    ids = [e[0] if isinstance(e, tuple) else e for e in flat]
    assert len(ids) == len(set(ids)), f"an entry repeats: {sorted(u for u, n in Counter(ids).items() if n > 1)}"
    return flat


async def error_reason(call: Awaitable[Any], code: grpc.StatusCode) -> str:
    """Await ``call``, expect ``code``, and return the ErrorInfo reason."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    assert caught.value.code() == code, caught.value.details()
    return str(error_info(caught.value).reason)


async def settle_counts(stub: Stub, expected: dict[int, tuple[int, int]]) -> None:
    """Wait for the counters consumer: the counts decide which path an intersection takes."""

    async def probe() -> dict[int, tuple[int, int]]:
        reply = await stub.BatchGetCounts(pb.BatchGetCountsRequest(user_ids=list(expected)))
        return {c.user_id: (c.followers_count, c.following_count) for c in reply.counts}

    await eventually(probe, lambda found: found == expected, timeout=30)


def newest_first(entries: Iterable[Entry]) -> list[Entry]:
    return sorted(entries, key=lambda e: Edge(e[0], e[1]).position, reverse=True)


async def expected_known(stub: Stub, viewer: int, user: int) -> list[Entry]:
    """The definition: ListFollowers(user), keeping those in ListFollowing(viewer)."""
    followees = {u for u, _ in await whole_list(stub, Direction.FOLLOWING, viewer)}
    return [e for e in await whole_list(stub, Direction.FOLLOWERS, user) if e[0] in followees]


async def assert_known_everywhere(svc: Servers, viewer: int, user: int, expected: list[Entry]) -> None:
    """Every server, several page sizes, and walks that alternate servers page by page give ``expected``."""
    for name, stub in svc.all().items():
        for size in (1, 3, 0, 1000):
            got = await walk([known(stub, viewer, user, size)], size)
            assert got == expected, f"{name} page_size={size}"
    mixed = [known(s, viewer, user, 2) for s in (svc.default, svc.scan, svc.truth)]
    assert await walk(mixed, 2) == expected, "a token from one path continued on the other"


async def assert_mutual_everywhere(svc: Servers, user: int, expected: list[int]) -> None:
    for name, stub in svc.all().items():
        for size in (1, 4, 0):
            assert await walk([mutual(stub, user, size)], size) == expected, f"{name} page_size={size}"
    mixed = [mutual(s, user, 2) for s in (svc.default, svc.scan, svc.truth)]
    assert await walk(mixed, 2) == expected


# -- 1. ListKnownFollowers: both paths ----------------------------------------------------------------------


async def test_known_followers_are_the_followed_followers_newest_first_on_both_paths(
    settings: Settings, stub: Stub, svc: Servers, counters: asyncio.Task[None], base: int
) -> None:
    """(a) viewer follows few, user has many followers; (b) the opposite; each on every path, all equal."""
    rng = random.Random(11)
    user, viewer = base + 1, base + 2  # shape (a): 80 followers of user, viewer follows 14
    fans = list(range(base + 10_001, base + 10_081))
    await seed(settings, [(f, user) for f in fans])
    known_a = rng.sample(fans[:-1], 8)
    outsiders = list(range(base + 20_001, base + 20_006))
    # The viewer follows in an order unrelated to when they followed the user.
    await seed(settings, [(viewer, u) for u in [*rng.sample(known_a, 8), *outsiders, user]])
    private_fan = fans[-1]  # a follower of user whom viewer only asks to follow: not an edge, not known
    assert private_fan not in known_a
    await stub.SetPrivacy(pb.SetPrivacyRequest(user_id=private_fan, private=True))
    assert await follow(stub, viewer, private_fan) == pb.FOLLOW_STATE_REQUESTED

    other, viewer_b = base + 3, base + 4  # shape (b): 12 followers of other, viewer_b follows 80
    others_fans = list(range(base + 40_001, base + 40_013))
    await seed(settings, [(f, other) for f in others_fans])
    known_b = others_fans[:6]
    await seed(settings, [(viewer_b, u) for u in range(base + 30_001, base + 30_075)])
    await seed(settings, [(viewer_b, u) for u in reversed(known_b)])

    lonely_ones = (base + 5, base + 6)  # 5 follows no follower of user; 6 nobody
    await seed(settings, [(lonely_ones[0], u) for u in outsiders[:3]])
    await settle_counts(
        stub, {user: (81, 0), viewer: (0, 14), other: (12, 0), viewer_b: (0, 80), lonely_ones[0]: (0, 3)}
    )

    fans_listed = await whole_list(stub, Direction.FOLLOWERS, user)
    expected_a = [e for e in fans_listed if e[0] in set(known_a)]
    assert len(expected_a) == 8
    assert expected_a == await expected_known(svc.truth, viewer, user)
    assert expected_a == newest_first(expected_a)
    await assert_known_everywhere(svc, viewer, user, expected_a)

    expected_b = await expected_known(svc.truth, viewer_b, other)
    assert {u for u, _ in expected_b} == set(known_b)
    assert [u for u, _ in expected_b] == list(reversed(known_b))  # by when they followed ``other``
    await assert_known_everywhere(svc, viewer_b, other, expected_b)

    for lonely in lonely_ones:
        for stub_ in svc.all().values():
            assert await known(stub_, lonely, user, 0)("") == ([], "")
            assert await known(stub_, lonely, other, 1)("") == ([], "")

    # A block by the viewer removes the edge: the follower is no longer known, at once.
    blocked = expected_a[0][0]
    await stub.Block(pb.BlockRequest(blocker_id=viewer, blocked_id=blocked))
    for stub_ in svc.all().values():
        assert await walk([known(stub_, viewer, user, 3)], 3) == expected_a[1:]


async def test_known_followers_page_token_is_bound_to_viewer_and_user(
    settings: Settings, stub: Stub, base: int
) -> None:
    """A ListKnownFollowers token works only for the same (viewer, user); any other query refuses it."""
    user, viewer, viewer2, other = base + 1, base + 2, base + 3, base + 4
    friends = range(base + 100, base + 110)
    await seed(settings, [(f, user) for f in friends] + [(f, other) for f in friends])
    await seed(settings, [(v, f) for v in (viewer, viewer2, user) for f in friends])
    entries, token = await known(stub, viewer, user, 2)("")
    assert len(entries) == 2
    assert token
    rest = await walk([known(stub, viewer, user, 3)], 3)
    assert (await known(stub, viewer, user, 3)(token))[0] == rest[2:5]

    wrong: list[tuple[str, Awaitable[Any]]] = [
        ("other viewer", known(stub, viewer2, user, 2)(token)),
        ("other user", known(stub, viewer, other, 2)(token)),
        ("swapped", known(stub, user, viewer, 2)(token)),
        ("mutual", mutual(stub, user, 2)(token)),
        ("followers", stub.ListFollowers(pb.ListFollowersRequest(user_id=user, page_size=2, page_token=token))),
        ("corrupt", known(stub, viewer, user, 2)(token[:-2] + ("AA" if token[-2:] != "AA" else "BB"))),
    ]
    for name, call in wrong:
        assert await error_reason(call, INVALID) == "INVALID_PAGE_TOKEN", name
    followers_token = (await stub.ListFollowers(pb.ListFollowersRequest(user_id=user, page_size=2))).next_page_token
    assert await error_reason(known(stub, viewer, user, 2)(followers_token), INVALID) == "INVALID_PAGE_TOKEN"


# -- 2. paging while the graph changes ----------------------------------------------------------------------


@dataclass
class Churn:
    """Follows and unfollows around a known-followers walk; none touches the ``stable`` entries."""

    stub: Stub
    user: int
    viewer: int
    churny: list[int]
    others: list[int]
    next_newcomer: int = 50_001
    step_no: int = 0
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    turn: asyncio.Event = field(default_factory=asyncio.Event)
    """Set at the end of each step: the background toggle then races the next page's read."""

    def __post_init__(self) -> None:
        self.first_newcomer = self.next_newcomer

    async def step(self) -> None:
        """Between two pages: a new known follower on top, and known and other followers re-following."""
        i = self.step_no
        self.step_no += 1
        newcomer = self.next_newcomer
        self.next_newcomer += 1
        await follow(self.stub, self.viewer, newcomer)
        await follow(self.stub, newcomer, self.user)
        c = self.churny[i % len(self.churny)]
        await unfollow(self.stub, c, self.user)
        await follow(self.stub, c, self.user)
        d = self.churny[(i + 3) % len(self.churny)]
        await unfollow(self.stub, self.viewer, d)
        await follow(self.stub, self.viewer, d)
        o = self.others[i % len(self.others)]
        await unfollow(self.stub, o, self.user)
        await follow(self.stub, o, self.user)
        self.turn.set()

    def finish(self) -> None:
        """Ends ``background`` (also while it waits for a turn)."""
        self.stop.set()
        self.turn.set()

    async def background(self, seed: int) -> None:
        """Meanwhile, toggle churny edges on both sides at random, racing the page reads: one toggle
        as each page after the first is read (toggling without a pause only repeated that race,
        at several times the writes)."""
        rng = random.Random(seed)
        while True:
            await self.turn.wait()
            self.turn.clear()
            if self.stop.is_set():
                return
            c = rng.choice(self.churny)
            if rng.random() < 0.5:
                await unfollow(self.stub, c, self.user)
                await follow(self.stub, c, self.user)
            else:
                await unfollow(self.stub, self.viewer, c)
                await follow(self.stub, self.viewer, c)


async def test_known_followers_walk_while_others_follow_and_unfollow(
    settings: Settings, stub: Stub, svc: Servers, counters: asyncio.Task[None], base: int
) -> None:
    """On either path, an entry known for the whole walk is returned exactly once, and nothing repeats."""
    rng = random.Random(22)
    user, viewer = base + 1, base + 2
    fans = list(range(base + 10_001, base + 10_121))
    await seed(settings, [(f, user) for f in fans])
    stable = rng.sample(fans, 20)
    churny = rng.sample(sorted(set(fans) - set(stable)), 6)
    others = sorted(set(fans) - set(stable) - set(churny))
    await seed(settings, [(viewer, u) for u in [*stable, *churny, *range(base + 20_001, base + 20_006)]])
    await settle_counts(stub, {user: (120, 0), viewer: (0, 31)})  # the candidate path: 31 < 120
    before = {u: at for u, at in await whole_list(stub, Direction.FOLLOWERS, user) if u in set(stable)}

    earlier_newcomers: set[int] = set()  # known followers by now: a later walk may return them
    walks = {"default": [svc.default], "scan": [svc.scan], "mixed": [svc.default, svc.scan, svc.truth]}
    for name, stubs in walks.items():
        churn = Churn(stub, user, viewer, churny, others, next_newcomer=base + 50_001 + 1000 * len(name))
        racer = asyncio.create_task(churn.background(len(name)))
        try:
            got = await walk([known(s, viewer, user, 4) for s in stubs], 4, churn.step)
        finally:
            churn.finish()
            await racer
        assert churn.step_no >= 4, name
        ids = [u for u, _ in got]
        assert set(stable) <= set(ids), f"{name}: stable entries skipped: {set(stable) - set(ids)}"
        allowed = set(stable) | set(churny) | earlier_newcomers  # this walk's newcomers land above its cursor
        assert set(ids) <= allowed, f"{name}: returned {set(ids) - allowed}"
        assert {u: at for u, at in got if u in before} == before, name
        assert got == newest_first(got), f"{name}: not newest first"
        earlier_newcomers |= set(range(churn.first_newcomer, churn.next_newcomer))


# -- 3. ListMutualFollows ------------------------------------------------------------------------------------


async def test_mutual_follows_on_both_paths(
    settings: Settings, stub: Stub, svc: Servers, counters: asyncio.Task[None], base: int
) -> None:
    """Exactly those who follow the user and whom the user follows back, newest first, on every path."""
    rng = random.Random(44)
    a = base + 1  # follows 10, followed by 60: the candidate path
    a_fans = list(range(base + 10_001, base + 10_061))
    await seed(settings, [(f, a) for f in a_fans])
    a_mutual = rng.sample(a_fans, 7)
    await seed(settings, [(a, u) for u in [*reversed(a_mutual), base + 20_001, base + 20_002, base + 20_003]])
    b = base + 2  # follows 60, followed by 10: the scan path
    b_follows = list(range(base + 30_001, base + 30_061))
    await seed(settings, [(b, u) for u in b_follows])
    b_mutual = rng.sample(b_follows, 6)
    others = [base + 40_001, base + 40_002, base + 40_003, base + 40_004]
    await seed(settings, [(f, b) for f in [*b_mutual[:3], *others[:2], *b_mutual[3:], *others[2:]]])
    nobody = base + 3
    await settle_counts(stub, {a: (60, 10), b: (10, 60), nobody: (0, 0)})

    for user, members in ((a, a_mutual), (b, b_mutual)):
        expected = [u for u, _ in await whole_list(svc.truth, Direction.FOLLOWERS, user) if u in set(members)]
        assert set(expected) == set(members)
        await assert_mutual_everywhere(svc, user, expected)
        # Mutuals are the user's known followers as seen by the user.
        assert [u for u, _ in await walk([known(svc.default, user, user, 0)], 0)] == expected
    assert [u for u, _ in await whole_list(svc.truth, Direction.FOLLOWERS, b)][-3:] == b_mutual[:3][::-1]
    for stub_ in svc.all().values():
        assert await mutual(stub_, nobody, 0)("") == ([], "")

    _, token = await mutual(stub, a, 2)("")
    assert token
    for call in (mutual(stub, b, 2)(token), known(stub, a, a, 2)(token), known(stub, nobody, a, 2)(token)):
        assert await error_reason(call, INVALID) == "INVALID_PAGE_TOKEN"
    _, known_token = await known(stub, a, a, 2)("")
    assert await error_reason(mutual(stub, a, 2)(known_token), INVALID) == "INVALID_PAGE_TOKEN"

    # Either side ending the follow ends the mutual, at once.
    await unfollow(stub, a, a_mutual[0])
    await stub.RemoveFollower(pb.RemoveFollowerRequest(user_id=a, follower_id=a_mutual[1]))
    left = set(a_mutual[2:])
    expected = [u for u, _ in await whole_list(svc.truth, Direction.FOLLOWERS, a) if u in left]
    assert len(expected) == 5
    for stub_ in svc.all().values():
        assert await walk([mutual(stub_, a, 2)], 2) == expected


# -- 4. SuggestFollows -------------------------------------------------------------------------------------


Ranked = list[tuple[int, int, float]]  # (user_id, mutual_count, score)


@dataclass
class Model:
    """The graph as the test made it: edges in the order made, pending requests, blocks."""

    edges: list[Pair] = field(default_factory=list)
    requests: set[Pair] = field(default_factory=set)
    blocks: set[Pair] = field(default_factory=set)

    def followees(self, user: int) -> list[int]:
        """Newest first."""
        return [b for a, b in reversed(self.edges) if a == user]

    def suggest(self, user: int, sample: int = 200, per_followee: int = 200) -> Ranked:
        looked_at = self.followees(user)[:sample]
        tally = Counter(c for f in looked_at for c in self.followees(f)[:per_followee] if c != user)
        excluded = {b for a, b in self.edges if a == user} | {b for a, b in self.requests if a == user}
        excluded |= {b for a, b in self.blocks if a == user} | {a for a, b in self.blocks if b == user}
        ranked = sorted(((c, n) for c, n in tally.items() if c not in excluded), key=lambda cn: (-cn[1], cn[0]))
        return [(c, n, n / len(looked_at)) for c, n in ranked]


@dataclass
class Graph:
    """Writes through the service, mirrored in the model."""

    stub: Stub
    model: Model = field(default_factory=Model)

    async def follow(self, a: int, b: int, *, requested: bool = False) -> None:
        state = await follow(self.stub, a, b)
        if requested:
            assert state == pb.FOLLOW_STATE_REQUESTED
            self.model.requests.add((a, b))
        else:
            assert state == pb.FOLLOW_STATE_FOLLOWING
            self.model.edges.append((a, b))

    async def follow_many(self, pairs: Sequence[Pair]) -> None:
        """In order, so that the model knows which follows are the most recent."""
        for a, b in pairs:
            await self.follow(a, b)

    async def unfollow(self, a: int, b: int) -> None:
        await unfollow(self.stub, a, b)
        self.model.edges = [e for e in self.model.edges if e != (a, b)]
        self.model.requests.discard((a, b))

    async def block(self, a: int, b: int) -> None:
        await self.stub.Block(pb.BlockRequest(blocker_id=a, blocked_id=b))
        self.model.edges = [e for e in self.model.edges if e not in ((a, b), (b, a))]
        self.model.requests -= {(a, b), (b, a)}
        self.model.blocks.add((a, b))

    async def unblock(self, a: int, b: int) -> None:
        await self.stub.Unblock(pb.UnblockRequest(blocker_id=a, blocked_id=b))
        self.model.blocks.discard((a, b))


async def suggest(stub: Stub, user: int, limit: int = 100) -> Ranked:
    reply = await stub.SuggestFollows(pb.SuggestFollowsRequest(user_id=user, limit=limit))
    return [(s.user_id, s.mutual_count, s.score) for s in reply.suggestions]


def same(got: Ranked, want: Ranked) -> bool:
    return [(u, n) for u, n, _ in got] == [(u, n) for u, n, _ in want] and all(
        g[2] == pytest.approx(w[2], rel=1e-12) for g, w in zip(got, want, strict=True)
    )


def assert_same(got: Ranked, want: Ranked, what: str = "") -> None:
    assert [(u, n) for u, n, _ in got] == [(u, n) for u, n, _ in want], what
    assert [s for _, _, s in got] == pytest.approx([s for _, _, s in want], rel=1e-12), what
    assert all(0 < s <= 1 for _, _, s in got), what


async def test_suggestions_rank_exclude_and_limit(settings: Settings, stub: Stub, svc: Servers, base: int) -> None:
    """Ranked by mutual_count then ascending ID, score = count / followees; the user, followed, requested
    and blocked-either-way accounts never appear; the limit is respected; every own write drops the cache."""
    rng = random.Random(55)
    user = base + 1
    friends = list(range(base + 1001, base + 1007))
    graph = Graph(stub)
    await graph.follow_many([(user, f) for f in friends])
    candidates = list(range(base + 2001, base + 2031))
    follows = [(f, c) for c in candidates for f in rng.sample(friends, rng.randint(1, 6))]
    follows += [(f, user) for f in friends]  # the user: would rank first
    follows += [(f, friends[1]) for f in (friends[0], friends[2], friends[3])]  # already followed
    private, private2, blocked, blocker = base + 3001, base + 3004, base + 3002, base + 3003
    follows += [(f, private) for f in friends[:5]] + [(f, private2) for f in friends[:2]]
    follows += [(f, blocked) for f in friends] + [(f, blocker) for f in friends]
    rng.shuffle(follows)
    await seed(settings, follows)  # the friends' follows: nobody has read their lists yet
    graph.model.edges += follows
    for account in (private, private2):
        await stub.SetPrivacy(pb.SetPrivacyRequest(user_id=account, private=True))
    await graph.follow(user, private, requested=True)
    await graph.block(user, blocked)
    await graph.block(blocker, user)

    want = graph.model.suggest(user)
    assert len(want) == 31  # every candidate, and private2
    assert {u for u, _, _ in want}.isdisjoint({user, private, blocked, blocker, *friends})
    assert len({n for _, n, _ in want}) > 3  # a real ranking, with ties
    assert_same(await suggest(svc.truth, user), want, "uncached")
    assert_same(await suggest(stub, user), want, "first call")
    assert_same(await suggest(stub, user), want, "cached")
    assert_same(await suggest(stub, user, 0), want[:20], "limit 0 -> 20")
    assert_same(await suggest(stub, user, 3), want[:3], "limit 3")
    assert_same(await suggest(stub, user, 1), want[:1], "limit 1")
    for limit in (-1, 101):
        call = stub.SuggestFollows(pb.SuggestFollowsRequest(user_id=user, limit=limit))
        assert await error_reason(call, INVALID) == "INVALID_LIMIT"

    def top() -> int:
        return graph.model.suggest(user)[0][0]

    steps: list[tuple[str, Callable[[], Awaitable[None]]]] = [
        ("follow the top suggestion", lambda: graph.follow(user, top())),
        ("unfollow a friend", lambda: graph.unfollow(user, friends[5])),
        ("block the top suggestion", lambda: graph.block(user, top())),
        ("blocked by the top suggestion", lambda: graph.block(top(), user)),
        ("unblock", lambda: graph.unblock(user, blocked)),
        ("request a private suggestion", lambda: graph.follow(user, private2, requested=True)),
        ("request rejected", lambda: reject(graph, private2, user)),
    ]
    for what, step in steps:
        before = graph.model.suggest(user)
        assert_same(await suggest(stub, user), before, f"before {what}")  # the cache holds the old answer
        await step()
        after = graph.model.suggest(user)
        assert after != before, what
        assert_same(await suggest(stub, user), after, f"right after {what}")
        assert_same(await suggest(stub, user, 0), after[:20], f"right after {what}, limit 0")
    assert blocked in {u for u, _, _ in graph.model.suggest(user)}


async def reject(graph: Graph, user: int, requester: int) -> None:
    await graph.stub.RejectFollowRequest(pb.RejectFollowRequestRequest(user_id=user, requester_id=requester))
    graph.model.requests.discard((requester, user))


async def test_suggestions_look_only_at_recent_followees_and_their_recent_followees(
    settings: Settings, stub: Stub, svc: Servers, base: int
) -> None:
    """With a sample of 2 followees and 2 of theirs, older follows do not count (the answer changes)."""
    user = base + 1
    # the two most recent are neither the lowest nor the highest IDs
    oldest, middle, newest = base + 12, base + 13, base + 11
    y, p, r, q, z = base + 22, base + 21, base + 23, base + 24, base + 25
    graph = Graph(stub)
    await graph.follow_many([(user, oldest), (user, middle), (user, newest)])
    await graph.follow_many([(oldest, y), (oldest, z), (middle, y), (middle, p), (middle, q)])
    await graph.follow_many([(newest, y), (newest, p), (newest, r)])

    everything = graph.model.suggest(user)
    bounded = graph.model.suggest(user, sample=2, per_followee=2)
    assert [(u, n) for u, n, _ in everything] == [(y, 3), (p, 2), (r, 1), (q, 1), (z, 1)]
    assert [(u, n, s) for u, n, s in bounded] == [(p, 2, 1.0), (r, 1, 0.5), (q, 1, 0.5)]

    bounded_settings = replace(settings, suggest_followee_sample=2, suggest_per_followee=2)
    async with (
        running_server(bounded_settings) as bounded_server,
        stub_for(bounded_server.port) as bounded_stub,
    ):
        assert_same(await suggest(svc.truth, user), everything, "default settings")
        for _ in range(2):  # computed, then cached
            assert_same(await suggest(cast("Stub", bounded_stub), user), bounded, "bounded")


async def test_suggestions_are_cached_until_the_ttl_unless_the_user_writes(
    settings: Settings, stub: Stub, svc: Servers, base: int
) -> None:
    """A second-degree change shows only after the TTL (1 s on one server, 300 s on the other);
    the user's own follow, unfollow or block shows on the very next call."""
    user, twin = base + 1, base + 2  # twin follows the same friends, read through the 1-second-TTL server
    f1, f2 = base + 11, base + 12
    a, b, n = base + 21, base + 22, base + 23
    graph = Graph(stub)
    await graph.follow_many([(user, f1), (user, f2), (twin, f1), (twin, f2), (f1, a), (f1, b), (f2, b)])
    first = graph.model.suggest(user)
    assert [(u, c) for u, c, _ in first] == [(b, 2), (a, 1)]
    assert graph.model.suggest(twin) == first

    short = replace(settings, suggest_cache_ttl_seconds=1)
    async with (
        running_server(short) as short_server,
        stub_for(short_server.port) as short_stub,
    ):
        assert_same(await suggest(stub, user), first, "user")
        assert_same(await suggest(cast("Stub", short_stub), twin), first, "twin")

        # Second-degree changes: none is a write of the user's (or the twin's).
        await graph.follow(f2, a)
        await graph.unfollow(f1, b)
        await graph.follow(f1, n)
        changed = graph.model.suggest(user)
        assert [(u, c) for u, c, _ in changed] == [(a, 2), (b, 1), (n, 1)]
        assert_same(await suggest(svc.truth, user), changed, "uncached")
        for _ in range(3):
            assert_same(await suggest(stub, user), first, "cached for 300 s")
        await eventually(lambda: suggest(cast("Stub", short_stub), twin), lambda got: same(got, changed), timeout=15)

        # The user's own writes drop the cached answer at once.
        await graph.follow(user, a)
        assert a not in {u for u, _, _ in await suggest(stub, user)}
        assert_same(await suggest(stub, user), graph.model.suggest(user), "after follow")
        await graph.unfollow(user, f1)
        assert_same(await suggest(stub, user), graph.model.suggest(user), "after unfollow")
        assert graph.model.suggest(user) == [(b, 1, 0.5)]
        await graph.block(user, b)
        assert await suggest(stub, user) == []
        assert await suggest(svc.truth, user) == []
