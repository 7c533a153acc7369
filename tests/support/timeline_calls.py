"""Helpers of the timeline tests: posting, reading home timelines, waiting for fanout."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import grpc
import redis.asyncio as aioredis
from socialgraph.v1 import timeline_pb2 as tpb
from socialgraph.v1 import timeline_pb2_grpc as tpb_grpc

from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import TableNames
from graph_service.settings import Settings
from graph_service.timelines import keys
from graph_service.tweets.tweet_store import DynamoTweetStore
from tests.support.polling import eventually

TimelineStub = tpb_grpc.TimelineServiceStub


@contextlib.asynccontextmanager
async def timeline_stub_for(port: int) -> AsyncIterator[TimelineStub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield tpb_grpc.TimelineServiceStub(channel)


@contextlib.asynccontextmanager
async def tweet_store(settings: Settings) -> AsyncIterator[DynamoTweetStore]:
    dynamo = AsyncDynamo.build(settings)
    try:
        yield DynamoTweetStore(dynamo, TableNames(settings.table_prefix))
    finally:
        dynamo.close()


async def post(store: DynamoTweetStore, author_id: int, text: str = "") -> int:
    return (await store.post(author_id, text)).tweet_id


async def home(
    stub: TimelineStub, user_id: int, page_size: int = 0, page_token: str = ""
) -> tpb.GetHomeTimelineResponse:
    return await stub.GetHomeTimeline(
        tpb.GetHomeTimelineRequest(user_id=user_id, page_size=page_size, page_token=page_token)
    )


async def whole_timeline(stub: TimelineStub, user_id: int, page_size: int = 100) -> list[int]:
    """Every page of the user's home timeline, in order."""
    found: list[int] = []
    token = ""
    while True:
        page = await home(stub, user_id, page_size, token)
        assert page.tweet_ids or not page.next_page_token, "a page that is not the last is empty"
        found += page.tweet_ids
        token = page.next_page_token
        if not token:
            return found


async def timeline_becomes(stub: TimelineStub, user_id: int, expected: list[int], timeout: float = 30.0) -> list[int]:  # noqa: ASYNC109 - a polling deadline
    """Poll until the user's whole home timeline is exactly ``expected`` (newest first)."""
    return await eventually(lambda: whole_timeline(stub, user_id), lambda got: got == expected, timeout=timeout)


@contextlib.asynccontextmanager
async def raw_redis(settings: Settings) -> AsyncIterator[aioredis.Redis]:
    """A plain client of the settings' (single-node) Redis, to look at what is stored."""
    client = aioredis.Redis.from_url(settings.redis_url, decode_responses=True)
    try:
        yield client
    finally:
        await client.aclose()


async def pushed(client: aioredis.Redis, user_id: int) -> list[int]:
    """The user's home_timeline list in Redis, as stored (duplicates and order included)."""
    return [int(v) for v in await client.lrange(keys.home(user_id), 0, -1)]
