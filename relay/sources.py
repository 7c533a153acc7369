"""The tables the relay tails and what their committed changes become: its one list of sources,
read by the relay process (``graph_service.entrypoints.relay``) and the relay Lambda
(``graph_service.entrypoints.relay_lambda``) alike.

A source's topic is its kinds' (``graph_service.events.kinds``); a new kind of event is produced by
a converter here, in the ``Source`` of the table its changes are committed to.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from graph_service.domain.accounts import Lifecycle
from graph_service.domain.tweet_ids import created_at_us
from graph_service.dynamodb.tables import FOLLOWERS, TWEETS
from graph_service.events.kinds import (
    ACCOUNT,
    FOLLOW,
    TWEET,
    AccountChange,
    AccountChanged,
    EventKind,
    Follow,
    Topic,
    TweetPosted,
    encode,
)
from graph_service.events.records import OutgoingRecord
from graph_service.store import account_items as ai
from graph_service.store.changes import edge_change
from graph_service.tweets.tweet_store import parse_tweet

__all__ = ["SOURCES", "Converter", "Source", "graph_events", "tweet_events"]

Converter = Callable[[dict[str, Any]], list[OutgoingRecord]]
"""A DynamoDB Streams record -> the records of its events (none for a change that is no event)."""


def tweet_events(record: dict[str, Any]) -> list[OutgoingRecord]:
    """A new item of the tweets table is a ``TweetCreated``; edits and deletes are not events."""
    image = record.get("dynamodb", {}).get("NewImage")
    if record.get("eventName") != "INSERT" or not image:
        return []
    tweet = parse_tweet(image)
    return [encode(TweetPosted(tweet.tweet_id, tweet.author_id, created_at_us(tweet.tweet_id)))]


def _record_time_us(record: dict[str, Any]) -> int:
    when = record.get("dynamodb", {}).get("ApproximateCreationDateTime")
    if isinstance(when, datetime):
        return int(when.timestamp() * 1_000_000)
    return int(float(when or 0) * 1_000_000)


ACCOUNT_CHANGES = {
    Lifecycle.DEACTIVATING: AccountChange.DEACTIVATED,
    Lifecycle.REACTIVATING: AccountChange.REACTIVATED,
    Lifecycle.DELETING: AccountChange.DELETED,
}
"""The lifecycle states a call moves an account to, and the event each is (its job's end is none)."""


def account_event(record: dict[str, Any]) -> list[OutgoingRecord]:
    """A committed lifecycle change (the state item written at a new generation) is an
    ``AccountEvent``; the job's progress and its end (the same generation) are not."""
    data = record.get("dynamodb", {})
    new, old = data.get("NewImage"), data.get("OldImage") or {}
    if record.get("eventName") not in {"INSERT", "MODIFY"} or not new:
        return []
    if old.get("gen") == new.get("gen"):
        return []
    change = ACCOUNT_CHANGES.get(Lifecycle(new["st"]["S"]))
    if change is None:
        return []
    return [encode(AccountChanged(int(data["Keys"]["pk"]["N"]), change, int(new["at"]["N"])))]


def graph_events(record: dict[str, Any]) -> list[OutgoingRecord]:
    """A made or removed edge (its membership item) is a ``FollowEvent``, unless an account's job
    moved it (archived, restored or deleted with the account: SPEC §5); a lifecycle change is an
    ``AccountEvent``; other items are none."""
    sort_key = record.get("dynamodb", {}).get("Keys", {}).get("sk", {}).get("S")
    if sort_key == ai.STATE:
        return account_event(record)
    change = edge_change(record)
    if change is None or _moved_by_a_job(record, added=change.added):
        return []
    # A removal's time is the stream record's, which DynamoDB rounds down (to the second; DynamoDB
    # Local to the minute): never date it before the follow it undoes.
    at = change.at_us if change.added else max(_record_time_us(record), change.at_us)
    return [encode(Follow(change.follower_id, change.followee_id, change.added, at))]


def _moved_by_a_job(record: dict[str, Any], *, added: bool) -> bool:
    """The edge's item carries the job's mark: a restore's put (``rest``), or an archive's or
    deletion's removal (``arch``, set just before; an unfollow after a restore removes an item with
    ``rest`` only, which is an unfollow)."""
    data = record.get("dynamodb", {})
    image = data.get("NewImage" if added else "OldImage") or {}
    return (ai.RESTORED_MARK if added else ai.ARCHIVE_MARK) in image


@dataclass(frozen=True, slots=True)
class Source:
    table: str
    """The table's name in ``graph_service.dynamodb.tables`` (without the prefix); the relay's
    checkpoints of its stream are those of consumer ``relay:<table>``."""
    kinds: tuple[EventKind[Any], ...]
    """The kinds of event ``convert`` makes, all on one topic."""
    convert: Converter

    @property
    def topic(self) -> Topic:
        """The one topic of the source's kinds (a relay and its log guard produce to one topic)."""
        (topic,) = {kind.topic for kind in self.kinds}
        return topic


SOURCES = (
    Source(TWEETS, (TWEET,), tweet_events),
    Source(FOLLOWERS, (FOLLOW, ACCOUNT), graph_events),
)
