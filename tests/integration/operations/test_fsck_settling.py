"""Nothing is reported on a first look: a suspicion that a write in flight explains is gone at the second look."""

from __future__ import annotations

import io

from graph_service.cache import keys
from graph_service.cache.inspection import CacheInspector
from graph_service.domain.models import Edge
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import FOLLOWERS, FOLLOWING, USERS, TableNames
from graph_service.operations.fsck_cache import CacheChecker
from graph_service.operations.fsck_confirm import Confirmer
from graph_service.operations.fsck_report import Report
from graph_service.operations.fsck_store import StoreChecker
from graph_service.redis_client.connect import graph_cache_redis
from graph_service.settings import Settings
from graph_service.store import items as it
from graph_service.store.account_store import DynamoAccounts
from graph_service.store.graph_store import DynamoGraphStore

T0 = 1_764_000_000_000_000


async def test_suspicions_that_settle_before_the_second_look_are_not_reported(settings: Settings) -> None:
    dynamo = AsyncDynamo.build(settings)
    redis = graph_cache_redis(settings)
    assert redis is not None

    async def put(table: str, item: dict[str, object]) -> None:
        await dynamo.call("put_item", TableName=settings.table(table), Item=item)

    def counter(user: int, followers: int, following: int, ver: int) -> dict[str, object]:
        return {
            "user_id": {"N": str(user)},
            "followers_count": {"N": str(followers)},
            "following_count": {"N": str(following)},
            "ver": {"N": str(ver)},
        }

    try:
        # First looks: half a follow (1 -> 2 in followers only, 3 -> 4 too), counters behind, a stale follow state.
        for follower, followee in ((1, 2), (3, 4)):
            made = Edge(follower, T0)
            await put(FOLLOWERS, it.item(it.key(it.EDGE, followee, follower), made))
            await put(FOLLOWERS, it.item(it.order_key(it.EDGE_ORDER, followee, made), made))
        await redis.set(keys.follow_state(1, 2), "0")
        await redis.set(keys.follow_state(3, 4), "0")
        report = Report(io.StringIO())
        later = Confirmer(0)  # not started yet: suspicions wait in its queue
        tables = TableNames(settings.table_prefix)
        store = StoreChecker(dynamo, tables, report, later)
        cache = CacheChecker(
            CacheInspector(redis),
            DynamoGraphStore(dynamo, tables),
            report,
            later,
            repair=False,
            accounts=DynamoAccounts(dynamo, tables),
        )
        for user in (1, 2, 3, 4):
            await store.check_user(user)
        store.flush()
        await cache.check([1, 3])
        assert later.waiting == 4  # pairs (2, 1) and (4, 3), one batch of counters (2, 4), one of cache entries

        # Then the writes in flight land for 1 -> 2 (the rest of its transaction, the consumer's
        # counters, the write-through's delete); 3 -> 4 stays broken.
        mirror = Edge(2, T0)
        await put(FOLLOWING, it.item(it.key(it.EDGE, 1, 2), mirror))
        await put(FOLLOWING, it.item(it.order_key(it.EDGE_ORDER, 1, mirror), mirror))
        await put(USERS, counter(2, 1, 0, 1))
        await put(USERS, counter(1, 0, 1, 1))
        await redis.delete(keys.follow_state(1, 2))
        async with later:
            pass

        assert {(v.kind, v.user, v.other) for v in report.violations} == {
            ("edge_one_sided", 4, 3),
            ("counter_drift", 4, None),
            ("cache_follow_state", 3, 4),
        }
    finally:
        dynamo.close()
        await redis.aclose()
