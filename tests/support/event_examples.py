"""One valid event of every kind, for the tests that must cover each kind (``tests/unit/events/test_kinds.py``
fails while a kind of ``graph_service.events.kinds.KINDS`` has none here)."""

from __future__ import annotations

from graph_service.events.kinds import AccountChange, AccountChanged, Event, Follow, TweetPosted

__all__ = ["EXAMPLES"]

EXAMPLES: dict[str, Event] = {
    "tweet": TweetPosted(tweet_id=5000, author_id=1, created_at_us=1_700_000_000_123_456),
    "follow": Follow(follower_id=7, followee_id=1, followed=True, at_us=1_700_000_000_654_321),
    "account": AccountChanged(user_id=7, change=AccountChange.DEACTIVATED, at_us=1_700_000_000_777_777),
}
"""Kind name -> an event of that kind."""
