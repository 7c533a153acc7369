"""The tweets table in memory: posting and ``TweetAuthors``, as ``DynamoTweetStore`` does them, for
unit tests only (held to it by ``tests/support/contracts/tweets.py``)."""

from __future__ import annotations

from collections.abc import Sequence

from graph_service.domain.errors import InvalidTweet
from graph_service.domain.ids import is_id
from graph_service.domain.models import Tweet
from graph_service.domain.tweet_ids import TweetIdGenerator
from graph_service.tweets.tweet_store import MAX_TEXT

__all__ = ["FakeTweets"]


class FakeTweets:
    def __init__(self) -> None:
        self.tweets: dict[int, Tweet] = {}
        self.lookups = 0
        """Calls of ``authors`` (a read path that found the author in the cache makes none)."""
        self._ids = TweetIdGenerator()

    async def post(self, author_id: int, text: str) -> Tweet:
        if not is_id(author_id):
            raise InvalidTweet("author must be a user ID greater than 0", field="author_id")
        if len(text) > MAX_TEXT:
            raise InvalidTweet(f"text is longer than {MAX_TEXT} characters", field="text")
        tweet = Tweet(self._ids.next_id(), author_id, text)
        self.tweets[tweet.tweet_id] = tweet
        return tweet

    async def authors(self, tweet_ids: Sequence[int]) -> dict[int, int]:
        self.lookups += 1
        return {t: self.tweets[t].author_id for t in tweet_ids if t in self.tweets}
