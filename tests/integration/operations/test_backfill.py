"""``socialgraph backfill`` on DynamoDB Local: items written by earlier releases (a request without
its mirror, a block and a mute without their reverses) get what they lack, once; what is already
complete is left alone, and a second run writes nothing."""

from __future__ import annotations

import random

from graph_service.domain.models import Edge, Mute
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import FOLLOWERS, FOLLOWING, TableNames
from graph_service.operations.backfill import backfill
from graph_service.settings import Settings
from graph_service.store import items as it
from graph_service.store.graph_store import DynamoGraphStore
from tests.support.table_items import partition_items

T = 1_700_000_000_000_000
HOUR = 3_600_000_000


async def test_what_earlier_releases_did_not_write_is_written_once(settings: Settings) -> None:
    a, b, c, d = (random.randrange(1, 2**40) * 10 + i for i in range(4))
    mute = Mute(a, T + 2, T + HOUR, True)
    dynamo = AsyncDynamo.build(settings)
    followers, following = settings.table(FOLLOWERS), settings.table(FOLLOWING)
    try:
        legacy = [  # as the release before the account lifecycle wrote them
            it.item(it.key(it.REQUEST, b, a), Edge(a, T)),  # a asked b
            it.item(it.order_key(it.REQUEST_ORDER, b, Edge(a, T)), Edge(a, T)),
            it.item(it.key(it.BLOCK, c, a), Edge(a, T + 1)),  # c blocks a
            it.mute_item(it.key(it.MUTE, d, a), mute),  # d mutes a for an hour
            it.mute_item(it.order_key(it.MUTE_ORDER, d, mute), mute),
        ]
        for body in legacy:
            await dynamo.call("put_item", TableName=followers, Item=body)
        store = DynamoGraphStore(dynamo, TableNames(settings.table_prefix))
        assert await store.add_request(c, d, T + 3)  # made by this release: complete already

        # The followers table: the legacy items and the request's two of this release (its mirror is in following).
        stored = len(legacy) + 2
        report = await backfill(dynamo, TableNames(settings.table_prefix), segments=2)
        assert (report.mirrors, report.reverses) == (1, 2)
        # A reverse written into a segment not read yet is read by the same run (the segments run at once).
        assert stored <= report.scanned <= stored + 2
        assert (await partition_items(dynamo, following, a))[f"R#{b:020d}"]["at"] == {"N": str(T)}
        reverses = await partition_items(dynamo, followers, a)
        assert reverses[f"b#{c:020d}"]["other"] == {"N": str(c)}
        assert reverses[f"m#{d:020d}"]["expires_at"] == {"N": str(-(-(T + HOUR) // 1_000_000))}

        again = await backfill(dynamo, TableNames(settings.table_prefix), segments=3)
        assert (again.mirrors, again.reverses) == (0, 0)
        assert again.scanned == stored + 2  # the two reverses the first run wrote are read too
    finally:
        dynamo.close()
