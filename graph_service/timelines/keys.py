"""Redis keys of the timelines. A user's keys share the hash tag ``{user_id}``, so they live in
the same Cluster slot as that user's graph cache entries."""

from __future__ import annotations

__all__ = [
    "CELEBRITIES",
    "TWEET_AUTHOR_PREFIX",
    "TWEET_AUTHOR_SUFFIX",
    "home",
    "new_followers",
    "recent",
    "tweet_author",
]

CELEBRITIES = "celebrities"
"""Sorted set: accounts whose tweets are pulled at read time (score: follower count when seen)."""


def home(user_id: int) -> str:
    """List of tweet IDs pushed to the user, newest first, capped."""
    return f"home_timeline:{{{user_id}}}"


def recent(author_id: int) -> str:
    """List of the author's own latest tweet IDs, newest first: pulled for celebrities, backfilled on follow."""
    return f"user_tweets:{{{author_id}}}"


def new_followers(author_id: int) -> str:
    """Sorted set: followers whose follow of the author the fanout applied lately (score: when), so
    that a tweet recorded meanwhile reaches them whatever the follower list it reads still says."""
    return f"new_followers:{{{author_id}}}"


TWEET_AUTHOR_PREFIX = "tweet_author:{"
TWEET_AUTHOR_SUFFIX = "}"
"""A tweet's author key is the tweet ID between these two: the home timeline's window script
(``scripts.HOME_WINDOW``) builds the keys of its entries' authors from them."""


def tweet_author(tweet_id: int) -> str:
    """The author of a tweet (a cache of the tweets table, with a TTL)."""
    return f"{TWEET_AUTHOR_PREFIX}{tweet_id}{TWEET_AUTHOR_SUFFIX}"
