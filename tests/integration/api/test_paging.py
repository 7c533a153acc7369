"""Paging of ListFollowers/ListFollowing: sizes, ends, and whole walks while others follow and unfollow.

Every scenario runs two servers on the same tables: one with the Redis cache (which takes every
write, so its cached lists stay current) and one with caching off, which reads DynamoDB directly.
Each check reads through both, so both ways a page can be served are walked. The big lists are seeded
straight into the tables (what is tested is the walk, not the Follow path); the follows and
unfollows made during a walk go through the cached server.

The tests share the module's tables and servers (``tests/support/shared_service.py``), each on user
IDs of its own (``base`` plus the IDs it always used).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, cast

import pytest
import pytest_asyncio
from redis.asyncio import Redis
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph_devstack.processes import ManagedProcess

from graph_service.cache import keys
from graph_service.domain.models import Direction
from graph_service.settings import Settings
from tests.support.graph_calls import Entry, list_page, walk
from tests.support.polling import eventually
from tests.support.runtimes import running_server, stub_for
from tests.support.seeding import seed_follows
from tests.support.shared_service import UserIds, flushed_redis, shared_service

if TYPE_CHECKING:
    # The async stub type exists only for type checkers; at run time the stub is the generated class.
    from socialgraph.v1.social_graph_pb2_grpc import SocialGraphServiceAsyncStub as Stub

pytestmark = pytest.mark.asyncio(loop_scope="module")  # the loop of the module's servers


@dataclass(frozen=True)
class Service:
    """``stub`` talks to the cached server (use it for every write); ``readers`` to both servers by name."""

    stub: Stub
    readers: dict[str, Stub]
    redis_url: str
    settings: Settings


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def svc(dynamodb_local: str, redis_node: ManagedProcess) -> AsyncIterator[Service]:
    """A cached and an uncached server sharing the module's tables (and its Redis, flushed first)."""
    redis_url = flushed_redis(redis_node)
    async with (
        shared_service(dynamodb_local, redis_url, streams=False) as cached,
        running_server(replace(cached.settings, redis_url="")) as plain_server,
        stub_for(plain_server.port) as plain_stub,
    ):
        cached_async, plain_async = cast("Stub", cached.stub), cast("Stub", plain_stub)
        yield Service(cached_async, {"redis": cached_async, "dynamodb": plain_async}, redis_url, cached.settings)


@pytest.fixture(scope="module")
def user_ids() -> UserIds:
    return UserIds(size=10_000_000)  # the churn's newcomers are 9,000,000 and up


@pytest.fixture
def base(user_ids: UserIds) -> int:
    """Added to every user ID of the test: IDs no other test of the module uses."""
    return user_ids.next_block()


async def follow_in_order(stub: Stub, pairs: Sequence[tuple[int, int]]) -> None:
    """Make the follows one after another, so list order is the order given (newest last)."""
    for a, b in pairs:
        await stub.Follow(pb.FollowRequest(follower_id=a, followee_id=b))


def flat(pages: list[list[Entry]]) -> list[Entry]:
    return [e for page in pages for e in page]


async def warm_cache(svc: Service, direction: Direction, user_id: int) -> None:
    """Precondition of the cached reads: read the list until the cached server holds it whole in Redis."""
    client = Redis.from_url(svc.redis_url)
    try:

        async def cached() -> int:
            await list_page(svc.stub, direction, user_id, 1, "")
            return int(await client.exists(keys.list_key(direction, user_id)))

        await eventually(cached, lambda n: n == 1)
    finally:
        await client.aclose()


# -- (a) walking while the list changes --------------------------------------------------------------------


@dataclass
class Churn:
    """Concurrent clients following and unfollowing while walks run; counts their finished calls."""

    stub: Stub
    direction: Direction
    owner: int
    ops: int = 0
    newcomers: list[int] = field(default_factory=list)
    left: set[int] = field(default_factory=set)
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    def _pair(self, other: int) -> tuple[int, int]:
        """(follower, followee) of the edge between the list's owner and ``other``."""
        return (other, self.owner) if self.direction is Direction.FOLLOWERS else (self.owner, other)

    async def _follow(self, other: int) -> None:
        a, b = self._pair(other)
        await self.stub.Follow(pb.FollowRequest(follower_id=a, followee_id=b))
        self.ops += 1

    async def _unfollow(self, other: int) -> None:
        a, b = self._pair(other)
        await self.stub.Unfollow(pb.UnfollowRequest(follower_id=a, followee_id=b))
        self.ops += 1

    async def newcomer(self, first_id: int) -> None:
        """Keep adding entries the list did not have (they land on top, before every walk's cursor)."""
        next_id = first_id
        while not self.stop.is_set():
            await self._follow(next_id)
            self.newcomers.append(next_id)
            next_id += 1

    async def refollower(self, ids: list[int], seed: int) -> None:
        """Keep unfollowing and re-following existing entries (each moves to the top of the list)."""
        rng = random.Random(seed)
        while not self.stop.is_set():
            other = rng.choice(ids)
            await self._unfollow(other)
            await self._follow(other)

    async def leaver(self, ids: list[int]) -> None:
        """Remove existing entries for good, one by one."""
        for other in ids:
            if self.stop.is_set():
                return
            await self._unfollow(other)
            self.left.add(other)

    async def progress(self, calls: int = 2) -> None:
        """Wait until the churn clients have finished ``calls`` more calls."""
        target = self.ops + calls

        async def done() -> int:
            return self.ops

        await eventually(done, lambda n: n >= target, interval=0.002)


def check_walk(name: str, pages: list[list[Entry]], initial: list[int], stable: set[int], churn: Churn) -> None:
    walked = flat(pages)
    ids = [user for user, _ in walked]
    assert all(pages[:-1]), f"{name}: a page that is not the last was empty"
    repeated = sorted(u for u in set(ids) if ids.count(u) > 1)
    assert not repeated, f"{name}: entries repeated: {repeated[:10]}"
    assert stable <= set(ids), (
        f"{name}: entries present for the whole walk were skipped: {sorted(stable - set(ids))[:10]}"
    )
    assert set(ids) <= set(initial) | set(churn.newcomers), f"{name}: the walk returned entries that never existed"
    positions = [(at, user) for user, at in walked]
    assert positions == sorted(positions, reverse=True), f"{name}: not newest first"


async def walk_under_churn(
    svc: Service, direction: Direction, owner: int, initial: list[int], page_size: int, base: int
) -> None:
    """Walk ``owner``'s list through both servers while others change it; no repeats, no skips, exact
    end state. The newcomers' IDs are ``base`` plus 9,000,000 and up."""
    refollowed = initial[::25]
    leaving = initial[7::40]
    stable = set(initial) - set(refollowed) - set(leaving)
    churn = Churn(svc.stub, direction, owner)
    workers = [
        asyncio.create_task(churn.newcomer(base + 9_000_000)),
        asyncio.create_task(churn.newcomer(base + 9_500_000)),
        # Two re-followers on disjoint entries: no two clients ever race on the same edge.
        asyncio.create_task(churn.refollower(refollowed[0::2], seed=1)),
        asyncio.create_task(churn.refollower(refollowed[1::2], seed=2)),
        asyncio.create_task(churn.leaver(leaving)),
    ]
    try:
        await churn.progress(5)
        walks = await asyncio.gather(
            *(
                walk(reader, direction, owner, page_size, between_pages=churn.progress)
                for reader in svc.readers.values()
            )
        )
    finally:
        churn.stop.set()
        await asyncio.gather(*workers)

    for name, pages in zip(svc.readers, walks, strict=True):
        check_walk(name, pages, initial, stable, churn)
        assert len(pages) >= len(initial) // page_size, f"{name}: the walk ended early"
    assert churn.ops >= 2 * max(len(pages) for pages in walks), "the list hardly changed during the walks"
    assert churn.left, "no entry was removed during the walks"
    assert churn.newcomers, "no entry was added during the walks"

    # Once the writes stop, a walk sees exactly the final membership, newest first, through either server.
    expected = sorted((set(initial) - churn.left) | set(churn.newcomers))
    for name, reader in svc.readers.items():
        final = flat(await walk(reader, direction, owner, 1000))
        assert sorted(u for u, _ in final) == expected, name
        assert [at for _, at in final] == sorted((at for _, at in final), reverse=True), name


async def test_walking_followers_while_others_follow_and_unfollow(svc: Service, base: int) -> None:
    """Walking 1,200 followers (page_size 97) amid follows and unfollows repeats none and skips no stable one."""
    owner = base + 1
    # More than one fill page (FILL_PAGE, 1,000) and 13 pages of walk, each amid the churn: 2,500
    # followers only made the walk, and the churn that runs as long as it, longer.
    initial = list(range(base + 100_000, base + 101_200))
    await seed_follows(svc.settings, [(u, owner) for u in initial])
    await warm_cache(svc, Direction.FOLLOWERS, owner)
    await walk_under_churn(svc, Direction.FOLLOWERS, owner, initial, page_size=97, base=base)


async def test_walking_following_while_the_user_follows_and_unfollows(svc: Service, base: int) -> None:
    """Walking 300 followees (page_size 23) while the owner follows, unfollows and refollows repeats and skips none."""
    owner = base + 2
    # 14 pages of walk, each amid the churn (600 followees only made the walk and the churn longer).
    initial = list(range(base + 200_000, base + 200_300))
    await seed_follows(svc.settings, [(owner, u) for u in initial])
    await warm_cache(svc, Direction.FOLLOWING, owner)
    await walk_under_churn(svc, Direction.FOLLOWING, owner, initial, page_size=23, base=base)


# -- (b) page sizes and the last page ---------------------------------------------------------------------


def sizes(pages: list[list[Entry]]) -> list[int]:
    return [len(p) for p in pages]


async def test_page_size_default_and_clamp(svc: Service, base: int) -> None:
    """page_size 0 gives 50 and anything above 1000 gives 1000; pages are full until the last, which has no token."""
    owner = base + 3
    total = 1_030
    followers = list(range(base + 300_000, base + 300_000 + total))
    await seed_follows(svc.settings, [(u, owner) for u in followers])
    await warm_cache(svc, Direction.FOLLOWERS, owner)
    for name, reader in svc.readers.items():
        first, token = await list_page(reader, Direction.FOLLOWERS, owner, 0, "")
        assert len(first) == 50, name
        assert token, name
        walks = {
            size: await walk(reader, Direction.FOLLOWERS, owner, size) for size in (0, 1000, 1001, 5000, 2**31 - 1)
        }
        assert sizes(walks[0]) == [50] * 20 + [30], name
        for size in (1000, 1001, 5000, 2**31 - 1):
            assert sizes(walks[size]) == [1000, 30], (name, size)
        for size, pages in walks.items():
            assert sorted(u for u, _ in flat(pages)) == followers, (name, size)
            assert flat(pages) == flat(walks[0]), f"{name}: page size {size} changed the order"


async def test_lists_that_divide_into_full_pages_end_without_an_empty_page(svc: Service, base: int) -> None:
    """When the list is a whole number of pages, the last full page has no token (no empty page after it)."""
    owner = base + 4
    await seed_follows(svc.settings, [(u, owner) for u in range(base + 400_000, base + 400_100)])
    await warm_cache(svc, Direction.FOLLOWERS, owner)
    for name, reader in svc.readers.items():
        assert sizes(await walk(reader, Direction.FOLLOWERS, owner, 0)) == [50, 50], name
        assert sizes(await walk(reader, Direction.FOLLOWERS, owner, 20)) == [20] * 5, name
        assert sizes(await walk(reader, Direction.FOLLOWERS, owner, 100)) == [100], name
        assert sizes(await walk(reader, Direction.FOLLOWERS, owner, 99)) == [99, 1], name
        assert sizes(await walk(reader, Direction.FOLLOWERS, owner, 101)) == [100], name


async def test_empty_list_is_one_empty_last_page(svc: Service, base: int) -> None:
    """An account with no followers or followees gets one empty page with an empty next_page_token."""
    for name, reader in svc.readers.items():
        for direction in Direction:
            assert await walk(reader, direction, base + 5, 0) == [[]], (name, direction)


async def test_page_after_the_rest_was_removed_is_empty_and_last(svc: Service, base: int) -> None:
    """When every entry after the cursor is removed, the next page is empty and carries no token (it is the end)."""
    owner = base + 6
    await follow_in_order(svc.stub, [(base + u, owner) for u in range(1, 6)])
    await warm_cache(svc, Direction.FOLLOWERS, owner)
    tokens = {}
    for name, reader in svc.readers.items():
        first, tokens[name] = await list_page(reader, Direction.FOLLOWERS, owner, 2, "")
        assert [u - base for u, _ in first] == [5, 4], name
        assert tokens[name], name
    for u in (1, 2, 3):
        await svc.stub.Unfollow(pb.UnfollowRequest(follower_id=base + u, followee_id=owner))
    for name, reader in svc.readers.items():
        assert await list_page(reader, Direction.FOLLOWERS, owner, 2, tokens[name]) == ([], ""), name


async def test_token_stays_valid_when_its_entry_is_unfollowed(svc: Service, base: int) -> None:
    """A token keeps working after the entry it ended on is unfollowed; the walk continues right after it."""
    owner = base + 7
    await follow_in_order(svc.stub, [(base + u, owner) for u in range(1, 7)])
    await warm_cache(svc, Direction.FOLLOWERS, owner)
    tokens = {}
    for name, reader in svc.readers.items():
        first, tokens[name] = await list_page(reader, Direction.FOLLOWERS, owner, 3, "")
        assert [u - base for u, _ in first] == [6, 5, 4], name
    await svc.stub.Unfollow(pb.UnfollowRequest(follower_id=base + 4, followee_id=owner))
    # Followed again: now the newest, before the cursor.
    await svc.stub.Follow(pb.FollowRequest(follower_id=base + 4, followee_id=owner))
    for name, reader in svc.readers.items():
        rest, end = await list_page(reader, Direction.FOLLOWERS, owner, 3, tokens[name])
        assert [u - base for u, _ in rest] == [3, 2, 1], name
        assert end == "", name


async def test_tokens_work_across_servers(svc: Service, base: int) -> None:
    """A token issued by one server continues the same walk on another server sharing the secret."""
    owner = base + 8
    await follow_in_order(svc.stub, [(base + u, owner) for u in range(1, 8)])
    await warm_cache(svc, Direction.FOLLOWERS, owner)
    cached, plain = svc.readers["redis"], svc.readers["dynamodb"]
    first, token = await list_page(cached, Direction.FOLLOWERS, owner, 3, "")
    second, token = await list_page(plain, Direction.FOLLOWERS, owner, 3, token)
    third, token = await list_page(cached, Direction.FOLLOWERS, owner, 3, token)
    assert [u - base for u, _ in first + second + third] == [7, 6, 5, 4, 3, 2, 1]
    assert token == ""
