"""The Kafka records of the project's events: encoding (relay) and checked decoding (consumers).

Every record carries two headers, ``event-type`` (the message's full name) and
``schema-version``; a consumer refuses what it does not know instead of guessing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError
from socialgraph.v1 import events_pb2 as pb

from graph_service.domain.ids import is_id
from graph_service.domain.times import from_timestamp, to_timestamp

__all__ = [
    "EVENT_TYPE_HEADER",
    "SCHEMA_VERSION",
    "VERSION_HEADER",
    "Follow",
    "OutgoingRecord",
    "TweetPosted",
    "UnreadableEvent",
    "decode",
    "follow_record",
    "tweet_record",
]

EVENT_TYPE_HEADER = "event-type"
VERSION_HEADER = "schema-version"
SCHEMA_VERSION = b"1"
TWEET_CREATED = pb.TweetCreated.DESCRIPTOR.full_name.encode()
FOLLOW_EVENT = pb.FollowEvent.DESCRIPTOR.full_name.encode()


@dataclass(frozen=True, slots=True)
class OutgoingRecord:
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]]


@dataclass(frozen=True, slots=True)
class TweetPosted:
    tweet_id: int
    author_id: int
    created_at_us: int


@dataclass(frozen=True, slots=True)
class Follow:
    follower_id: int
    followee_id: int
    followed: bool
    """True: the edge was made; False: it was removed."""
    at_us: int


class UnreadableEvent(Exception):
    """A record no consumer of this version can use; ``reason`` is the counter it is skipped under."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


def _headers(event_type: bytes) -> list[tuple[str, bytes]]:
    return [(EVENT_TYPE_HEADER, event_type), (VERSION_HEADER, SCHEMA_VERSION)]


def tweet_record(tweet_id: int, author_id: int, created_at_us: int) -> OutgoingRecord:
    message = pb.TweetCreated(tweet_id=tweet_id, author_id=author_id, created_at=to_timestamp(created_at_us))
    return OutgoingRecord(str(tweet_id).encode(), message.SerializeToString(), _headers(TWEET_CREATED))


def follow_record(follower_id: int, followee_id: int, followed: bool, at_us: int) -> OutgoingRecord:
    kind = pb.FOLLOW_EVENT_TYPE_FOLLOWED if followed else pb.FOLLOW_EVENT_TYPE_UNFOLLOWED
    message = pb.FollowEvent(type=kind, follower_id=follower_id, followee_id=followee_id, at=to_timestamp(at_us))
    return OutgoingRecord(str(followee_id).encode(), message.SerializeToString(), _headers(FOLLOW_EVENT))


def _parse(message: Any, value: bytes) -> None:
    try:
        message.ParseFromString(value)
    except DecodeError as exc:
        raise UnreadableEvent("malformed", f"not a {message.DESCRIPTOR.full_name}: {exc}") from exc


def decode(headers: Any, value: bytes | None) -> TweetPosted | Follow:
    """The event of one consumed record, or ``UnreadableEvent`` (malformed, unknown type or version)."""
    found = dict(headers or ())
    event_type, version = found.get(EVENT_TYPE_HEADER), found.get(VERSION_HEADER)
    if event_type not in {TWEET_CREATED, FOLLOW_EVENT}:
        raise UnreadableEvent("unknown_type", f"event-type header {event_type!r}")
    if version != SCHEMA_VERSION:
        raise UnreadableEvent("unknown_version", f"schema-version header {version!r}")
    if value is None:
        raise UnreadableEvent("malformed", "no value")
    if event_type == TWEET_CREATED:
        tweet = pb.TweetCreated()
        _parse(tweet, value)
        if not (is_id(tweet.tweet_id) and is_id(tweet.author_id)):
            raise UnreadableEvent("malformed", "tweet_id and author_id must be greater than 0")
        return TweetPosted(tweet.tweet_id, tweet.author_id, from_timestamp(tweet.created_at))
    follow = pb.FollowEvent()
    _parse(follow, value)
    if not (is_id(follow.follower_id) and is_id(follow.followee_id)) or follow.follower_id == follow.followee_id:
        raise UnreadableEvent("malformed", "follower_id and followee_id must be two IDs greater than 0")
    if follow.type not in {pb.FOLLOW_EVENT_TYPE_FOLLOWED, pb.FOLLOW_EVENT_TYPE_UNFOLLOWED}:
        raise UnreadableEvent("malformed", f"follow event type {follow.type}")
    return Follow(
        follow.follower_id, follow.followee_id, follow.type == pb.FOLLOW_EVENT_TYPE_FOLLOWED, from_timestamp(follow.at)
    )
