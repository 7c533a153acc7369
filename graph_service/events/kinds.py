"""Every kind of event, in one place: its typed event, protobuf message, key, topic and codec.

The relay encodes with it (``encode``); the fanout worker decodes with it (``decode``, to a typed
event that ``Fanout.apply`` handles) and counts under its names; the relay's sources
(``relay/sources.py``), the fanout's subscription and its metrics' label values read ``KINDS``.

A new kind of event is: its message in ``protos/socialgraph/v1/events.proto``; its typed event,
codec and ``EventKind`` here (in ``KINDS`` and ``Event``); its producer, a converter in
``relay/sources.py``; its handler, a case of ``Fanout.apply``. Nothing else: the tests of the
kinds and the sources fail while its codec, example or producer is missing, and mypy while its
handler is (``assert_never``).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp
from socialgraph.v1 import events_pb2 as pb

from graph_service.domain.ids import is_id
from graph_service.domain.times import from_timestamp, to_timestamp
from graph_service.events.records import OutgoingRecord, UnreadableEvent, headers, opened, parse

__all__ = [
    "ACCOUNT",
    "FOLLOW",
    "KINDS",
    "KIND_NAMES",
    "TWEET",
    "AccountChange",
    "AccountChanged",
    "Event",
    "EventKind",
    "Follow",
    "Topic",
    "TopicNames",
    "TweetPosted",
    "decode",
    "encode",
    "kind_of",
]

E = TypeVar("E")


class Topic(enum.Enum):
    """The event topics; their names are settings (``graph_service.events.kafka.topic_names``)."""

    TWEETS = "tweets"
    """``SG_TWEETS_TOPIC``"""
    GRAPH_EVENTS = "graph_events"
    """``SG_GRAPH_EVENTS_TOPIC``"""


TopicNames = Mapping[Topic, str]
"""The configured name of every topic, tweets first."""


@dataclass(frozen=True, slots=True)
class EventKind(Generic[E]):
    name: str
    """Its label value: ``socialgraph_fanout_events{kind}``, the fanout worker's ``stats.handled``."""
    event: type[E]
    """The typed event consumers get."""
    message: type[Message]
    """Its protobuf message; the record's ``event-type`` header is the message's full name."""
    topic: Topic
    key: Callable[[E], int]
    """The ID its records are keyed by: the events of one key are in one partition, in order."""
    to_message: Callable[[E], Message]
    from_message: Callable[[Any], E]
    """The typed event of a parsed message, or ``UnreadableEvent("malformed")``."""

    @property
    def event_type(self) -> bytes:
        return str(self.message.DESCRIPTOR.full_name).encode()

    def encode(self, event: E) -> OutgoingRecord:
        value = self.to_message(event).SerializeToString()
        return OutgoingRecord(str(self.key(event)).encode(), value, headers(self.event_type))

    def decode(self, value: bytes) -> E:
        message = self.message()
        parse(message, value)
        return self.from_message(message)


def _micros(stamp: Timestamp) -> int:
    """A record's timestamp in microseconds; ``UnreadableEvent("malformed")`` for one protobuf
    parses but cannot convert (seconds outside years 1 to 9999, nanos outside 0 to 999,999,999)."""
    try:
        return from_timestamp(stamp)
    except ValueError as exc:
        raise UnreadableEvent("malformed", str(exc)) from exc


# -- TweetCreated ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TweetPosted:
    tweet_id: int
    author_id: int
    created_at_us: int


def _tweet_message(event: TweetPosted) -> pb.TweetCreated:
    created_at = to_timestamp(event.created_at_us)
    return pb.TweetCreated(tweet_id=event.tweet_id, author_id=event.author_id, created_at=created_at)


def _tweet_event(message: pb.TweetCreated) -> TweetPosted:
    if not (is_id(message.tweet_id) and is_id(message.author_id)):
        raise UnreadableEvent("malformed", "tweet_id and author_id must be greater than 0")
    return TweetPosted(message.tweet_id, message.author_id, _micros(message.created_at))


TWEET: EventKind[TweetPosted] = EventKind(
    name="tweet",
    event=TweetPosted,
    message=pb.TweetCreated,
    topic=Topic.TWEETS,
    key=lambda event: event.tweet_id,
    to_message=_tweet_message,
    from_message=_tweet_event,
)


# -- FollowEvent ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Follow:
    follower_id: int
    followee_id: int
    followed: bool
    """True: the edge was made; False: it was removed."""
    at_us: int


def _follow_message(event: Follow) -> pb.FollowEvent:
    kind = pb.FOLLOW_EVENT_TYPE_FOLLOWED if event.followed else pb.FOLLOW_EVENT_TYPE_UNFOLLOWED
    at = to_timestamp(event.at_us)
    return pb.FollowEvent(type=kind, follower_id=event.follower_id, followee_id=event.followee_id, at=at)


def _follow_event(message: pb.FollowEvent) -> Follow:
    follower, followee = message.follower_id, message.followee_id
    if not (is_id(follower) and is_id(followee)) or follower == followee:
        raise UnreadableEvent("malformed", "follower_id and followee_id must be two IDs greater than 0")
    if message.type not in {pb.FOLLOW_EVENT_TYPE_FOLLOWED, pb.FOLLOW_EVENT_TYPE_UNFOLLOWED}:
        raise UnreadableEvent("malformed", f"follow event type {message.type}")
    return Follow(follower, followee, message.type == pb.FOLLOW_EVENT_TYPE_FOLLOWED, _micros(message.at))


FOLLOW: EventKind[Follow] = EventKind(
    name="follow",
    event=Follow,
    message=pb.FollowEvent,
    topic=Topic.GRAPH_EVENTS,
    key=lambda event: event.followee_id,
    to_message=_follow_message,
    from_message=_follow_event,
)


# -- AccountEvent ---------------------------------------------------------------------------------


class AccountChange(enum.Enum):
    DEACTIVATED = pb.ACCOUNT_EVENT_TYPE_DEACTIVATED
    REACTIVATED = pb.ACCOUNT_EVENT_TYPE_REACTIVATED
    DELETED = pb.ACCOUNT_EVENT_TYPE_DELETED


@dataclass(frozen=True, slots=True)
class AccountChanged:
    user_id: int
    change: AccountChange
    at_us: int


def _account_message(event: AccountChanged) -> pb.AccountEvent:
    return pb.AccountEvent(type=event.change.value, user_id=event.user_id, at=to_timestamp(event.at_us))


def _account_event(message: pb.AccountEvent) -> AccountChanged:
    if not is_id(message.user_id):
        raise UnreadableEvent("malformed", "user_id must be an ID greater than 0")
    try:
        change = AccountChange(message.type)
    except ValueError:
        raise UnreadableEvent("malformed", f"account event type {message.type}") from None
    return AccountChanged(message.user_id, change, _micros(message.at))


ACCOUNT: EventKind[AccountChanged] = EventKind(
    name="account",
    event=AccountChanged,
    message=pb.AccountEvent,
    topic=Topic.GRAPH_EVENTS,
    key=lambda event: event.user_id,
    to_message=_account_message,
    from_message=_account_event,
)


# -- the registry ---------------------------------------------------------------------------------

Event = TweetPosted | Follow | AccountChanged
"""Every typed event: what ``decode`` returns and ``Fanout.apply`` takes (mypy holds its match exhaustive)."""
KINDS: tuple[EventKind[Any], ...] = (TWEET, FOLLOW, ACCOUNT)
KIND_NAMES = tuple(kind.name for kind in KINDS)
"""The label values of the fanout's per-kind metrics (their series exist from the start)."""
_BY_EVENT: dict[type, EventKind[Any]] = {kind.event: kind for kind in KINDS}
_BY_EVENT_TYPE: dict[bytes, EventKind[Any]] = {kind.event_type: kind for kind in KINDS}


def kind_of(event: Event) -> EventKind[Any]:
    return _BY_EVENT[type(event)]


def encode(event: Event) -> OutgoingRecord:
    """The record the relay produces for ``event``: keyed by its kind's key, with both headers."""
    return kind_of(event).encode(event)


def decode(found_headers: Any, value: bytes | None) -> Event:
    """The event of one consumed record, or ``UnreadableEvent`` (malformed, unknown type or version)."""
    event_type, checked = opened(found_headers, value, _BY_EVENT_TYPE)
    event: Event = _BY_EVENT_TYPE[event_type].decode(checked)
    return event
