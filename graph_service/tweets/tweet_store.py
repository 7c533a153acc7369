"""The ``tweets`` table: one conditional ``PutItem`` per tweet (its stream feeds the relay), and
author lookups for the timeline read path.

``tweets`` (pk ``tweet_id`` N; ``author_id`` N, ``text`` S) stands in locally for the tweet
service's table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from botocore.exceptions import ClientError

from graph_service.domain.errors import InvalidTweet, Unavailable
from graph_service.domain.ids import is_id
from graph_service.domain.models import Tweet
from graph_service.domain.tweet_ids import TweetIdGenerator
from graph_service.dynamodb.client import AsyncDynamo, error_code
from graph_service.dynamodb.operations import MAX_ATTEMPTS, batch_get_all
from graph_service.dynamodb.tables import TWEETS, TableNames

__all__ = ["MAX_TEXT", "DynamoTweetStore", "parse_tweet"]

MAX_TEXT = 280


def parse_tweet(image: dict[str, Any]) -> Tweet:
    """A tweets-table item (as a stream record's image holds it); ``ValueError`` if its IDs are not IDs."""
    tweet = Tweet(int(image["tweet_id"]["N"]), int(image["author_id"]["N"]), image.get("text", {}).get("S", ""))
    if not (is_id(tweet.tweet_id) and is_id(tweet.author_id)):
        raise ValueError(f"tweet {tweet.tweet_id} by {tweet.author_id}: IDs must be unsigned 64-bit and greater than 0")
    return tweet


class DynamoTweetStore:
    """Posting (the ``socialgraph post`` command) and ``TweetAuthors`` (the timeline read path)."""

    def __init__(self, dynamo: AsyncDynamo, tables: TableNames, ids: TweetIdGenerator | None = None) -> None:
        self._dynamo = dynamo
        self._table = tables.table(TWEETS)
        self._ids = ids or TweetIdGenerator()

    async def post(self, author_id: int, text: str) -> Tweet:
        if not is_id(author_id):
            raise InvalidTweet("author must be a user ID greater than 0", field="author_id")
        if len(text) > MAX_TEXT:
            raise InvalidTweet(f"text is longer than {MAX_TEXT} characters", field="text")
        for _ in range(MAX_ATTEMPTS):
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
                continue  # two posters drew the same worker number in the same millisecond: next ID
            return tweet
        raise Unavailable("every tweet ID drawn was taken")

    async def authors(self, tweet_ids: Sequence[int]) -> dict[int, int]:
        keys = [{"tweet_id": {"N": str(t)}} for t in dict.fromkeys(tweet_ids)]
        found = await batch_get_all(self._dynamo, self._table, keys, consistent=False, projection="tweet_id, author_id")
        return {int(i["tweet_id"]["N"]): int(i["author_id"]["N"]) for i in found}
