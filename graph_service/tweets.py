"""Tweets: time-ordered 64-bit IDs and the ``tweets`` table (posting, author lookup).

An ID is ``milliseconds since 2020-01-01 << 22 | worker << 12 | sequence`` (snowflake layout):
ordering by ID is ordering by time, to the millisecond, across every poster.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from graph_service.errors import DomainError
from graph_service.settings import Settings
from graph_service.store.dynamo_client import AsyncDynamo, error_code
from graph_service.store.tables import TWEETS

__all__ = ["MAX_TEXT", "InvalidTweet", "Tweet", "TweetIdGenerator", "TweetStore", "created_at_us"]

EPOCH_MS = 1_577_836_800_000  # 2020-01-01T00:00:00Z
WORKER_BITS = 10
SEQUENCE_BITS = 12
MAX_TEXT = 280
BATCH_GET_LIMIT = 100


def created_at_us(tweet_id: int) -> int:
    """When the tweet was posted (to the millisecond), from its ID alone."""
    return ((tweet_id >> (WORKER_BITS + SEQUENCE_BITS)) + EPOCH_MS) * 1000


class TweetIdGenerator:
    """Snowflake IDs: unique per worker number, increasing within one generator."""

    def __init__(self, worker: int | None = None) -> None:
        self._worker = secrets.randbelow(1 << WORKER_BITS) if worker is None else worker
        if not 0 <= self._worker < 1 << WORKER_BITS:
            raise ValueError(f"worker must be in [0, {1 << WORKER_BITS})")
        self._lock = threading.Lock()
        self._last_ms = -1
        self._sequence = 0

    def next_id(self) -> int:
        with self._lock:
            now = time.time_ns() // 1_000_000 - EPOCH_MS
            if now <= self._last_ms:  # same millisecond (or the clock stepped back): next sequence
                now = self._last_ms
                self._sequence = (self._sequence + 1) & ((1 << SEQUENCE_BITS) - 1)
                if self._sequence == 0:
                    now += 1  # this millisecond is used up: borrow the next one
            else:
                self._sequence = 0
            self._last_ms = now
            return (now << (WORKER_BITS + SEQUENCE_BITS)) | (self._worker << SEQUENCE_BITS) | self._sequence


class InvalidTweet(DomainError):
    reason = "INVALID_TWEET"


@dataclass(frozen=True, slots=True)
class Tweet:
    tweet_id: int
    author_id: int
    text: str


class TweetStore:
    """The ``tweets`` table: one ``PutItem`` per tweet; its stream feeds the relay."""

    def __init__(self, dynamo: AsyncDynamo, settings: Settings, ids: TweetIdGenerator | None = None) -> None:
        self._dynamo = dynamo
        self._table = settings.table(TWEETS)
        self._ids = ids or TweetIdGenerator()

    async def post(self, author_id: int, text: str) -> Tweet:
        if not 0 < author_id < 2**64:
            raise InvalidTweet("author must be a user ID greater than 0", field="author_id")
        if len(text) > MAX_TEXT:
            raise InvalidTweet(f"text is longer than {MAX_TEXT} characters", field="text")
        while True:
            tweet = Tweet(self._ids.next_id(), author_id, text)
            try:
                await self._dynamo.call(
                    "put_item",
                    TableName=self._table,
                    Item={
                        "tweet_id": {"N": str(tweet.tweet_id)},
                        "author_id": {"N": str(author_id)},
                        "text": {"S": text},
                    },
                    ConditionExpression="attribute_not_exists(tweet_id)",  # never overwrite another poster's tweet
                )
            except ClientError as exc:
                if error_code(exc) != "ConditionalCheckFailedException":
                    raise
                continue  # two posters drew the same worker number in the same millisecond
            return tweet

    def close(self) -> None:
        self._dynamo.close()

    async def authors(self, tweet_ids: Sequence[int]) -> dict[int, int]:
        """The author of each of those tweets that exists."""
        unique = list(dict.fromkeys(tweet_ids))
        chunks = [unique[i : i + BATCH_GET_LIMIT] for i in range(0, len(unique), BATCH_GET_LIMIT)]
        found: dict[int, int] = {}
        for part in await asyncio.gather(*(self._authors_of(chunk) for chunk in chunks)):
            found.update(part)
        return found

    async def _authors_of(self, tweet_ids: list[int]) -> dict[int, int]:
        request: dict[str, Any] = {
            self._table: {
                "Keys": [{"tweet_id": {"N": str(t)}} for t in tweet_ids],
                "ProjectionExpression": "tweet_id, author_id",
            }
        }
        found: dict[int, int] = {}
        while request:
            response = await self._dynamo.call("batch_get_item", RequestItems=request)
            for item in response.get("Responses", {}).get(self._table, []):
                found[int(item["tweet_id"]["N"])] = int(item["author_id"]["N"])
            request = response.get("UnprocessedKeys") or {}
        return found
