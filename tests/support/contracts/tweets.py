"""What every implementation of posting and ``TweetAuthors`` must do (the fake and DynamoDB Local)."""

from __future__ import annotations

from typing import Protocol

import pytest

from graph_service.domain.errors import InvalidTweet
from graph_service.domain.models import Tweet
from graph_service.domain.ports import TweetAuthors
from graph_service.tweets.tweet_store import MAX_TEXT

__all__ = ["TweetStore", "TweetsContract"]


class TweetStore(TweetAuthors, Protocol):
    async def post(self, author_id: int, text: str) -> Tweet: ...


class TweetsContract:
    async def test_posted_tweets_have_increasing_ids_and_known_authors(self, tweets: TweetStore) -> None:
        posted = [await tweets.post(author, f"tweet {author}") for author in (1, 2, 1)]
        assert [t.tweet_id for t in posted] == sorted(t.tweet_id for t in posted)
        assert len({t.tweet_id for t in posted}) == 3
        assert [t.text for t in posted] == ["tweet 1", "tweet 2", "tweet 1"]
        ids = [t.tweet_id for t in posted]
        assert await tweets.authors([*ids, 12345]) == {ids[0]: 1, ids[1]: 2, ids[2]: 1}
        assert await tweets.authors([]) == {}

    async def test_a_text_of_the_longest_length_is_posted(self, tweets: TweetStore) -> None:
        tweet = await tweets.post(1, "x" * MAX_TEXT)
        assert await tweets.authors([tweet.tweet_id]) == {tweet.tweet_id: 1}

    @pytest.mark.parametrize(
        ("author", "text", "field"), [(0, "hi", "author_id"), (2**64, "hi", "author_id"), (1, "x" * 281, "text")]
    )
    async def test_bad_tweets_are_refused(self, tweets: TweetStore, author: int, text: str, field: str) -> None:
        with pytest.raises(InvalidTweet) as refused:
            await tweets.post(author, text)
        assert refused.value.reason == "INVALID_TWEET"
        assert refused.value.metadata == {"field": field}
