"""The Kafka records of the events: encoding and checked decoding (the relay's converters are
tested in tests/unit/relay/test_sources.py)."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from hypothesis import given
from hypothesis import strategies as st
from socialgraph.v1 import events_pb2 as pb

from graph_service.domain.tweet_ids import TweetIdGenerator, created_at_us
from graph_service.events.kinds import Follow, TweetPosted, decode, encode
from graph_service.events.records import UnreadableEvent

MAX_ID = 2**64 - 1
TWEET_TYPE = b"socialgraph.v1.TweetCreated"
FOLLOW_TYPE = b"socialgraph.v1.FollowEvent"
AT_US = 1_700_000_000_123_456
ids = st.integers(min_value=1, max_value=MAX_ID)
instants = st.integers(min_value=0, max_value=4_000_000_000_000_000)  # 1970 .. 2096, in microseconds


def headers(event_type: bytes | None, version: bytes | None = b"1") -> list[tuple[str, bytes]]:
    found = []
    if event_type is not None:
        found.append(("event-type", event_type))
    if version is not None:
        found.append(("schema-version", version))
    return found


def follow_value(kind: int, follower: int, followee: int, at_us: int = AT_US) -> bytes:
    message = pb.FollowEvent(type=kind, follower_id=follower, followee_id=followee)  # type: ignore[arg-type]  # any number: unknown kinds too
    message.at.FromMicroseconds(at_us)
    return message.SerializeToString()


def tweet_value(tweet_id: int, author: int, at_us: int = AT_US) -> bytes:
    message = pb.TweetCreated(tweet_id=tweet_id, author_id=author)
    message.created_at.FromMicroseconds(at_us)
    return message.SerializeToString()


def refused(headers_: Any, value: bytes | None) -> str:
    with pytest.raises(UnreadableEvent) as caught:
        decode(headers_, value)
    return caught.value.reason


# -- encoding and round trips ---------------------------------------------------------------------


def test_a_tweet_record_is_keyed_by_the_tweet_and_carries_the_headers() -> None:
    record = encode(TweetPosted(123, 45, AT_US))
    assert record.key == b"123"
    assert record.headers == [("event-type", TWEET_TYPE), ("schema-version", b"1")]
    message = pb.TweetCreated.FromString(record.value)
    assert (message.tweet_id, message.author_id, message.created_at.ToMicroseconds()) == (123, 45, AT_US)


@pytest.mark.parametrize(
    ("followed", "kind"),
    [(True, pb.FOLLOW_EVENT_TYPE_FOLLOWED), (False, pb.FOLLOW_EVENT_TYPE_UNFOLLOWED)],
)
def test_a_follow_record_is_keyed_by_the_followee_and_carries_the_headers(followed: bool, kind: int) -> None:
    record = encode(Follow(7, 900, followed, AT_US))
    assert record.key == b"900"
    assert record.headers == [("event-type", FOLLOW_TYPE), ("schema-version", b"1")]
    message = pb.FollowEvent.FromString(record.value)
    assert (message.type, message.follower_id, message.followee_id) == (kind, 7, 900)
    assert message.at.ToMicroseconds() == AT_US


@given(tweet_id=ids, author=ids, at=instants)
def test_tweet_created_round_trips(tweet_id: int, author: int, at: int) -> None:
    record = encode(TweetPosted(tweet_id, author, at))
    assert decode(record.headers, record.value) == TweetPosted(tweet_id, author, at)


@given(follower=ids, followee=ids, followed=st.booleans(), at=instants)
def test_follow_event_round_trips(follower: int, followee: int, followed: bool, at: int) -> None:
    if follower == followee:
        followee = follower % MAX_ID + 1
    record = encode(Follow(follower, followee, followed, at))
    assert decode(record.headers, record.value) == Follow(follower, followee, followed, at)


def test_decode_takes_the_headers_as_a_consumer_gives_them() -> None:
    """aiokafka hands headers over as a tuple of (str, bytes) pairs, in any order."""
    record = encode(TweetPosted(10, 20, AT_US))
    assert decode(tuple(reversed(record.headers)), record.value) == TweetPosted(10, 20, AT_US)


def test_a_real_tweet_id_decodes_to_its_posting_time() -> None:
    tweet_id = TweetIdGenerator(worker=1).next_id()
    record = encode(TweetPosted(tweet_id, 3, created_at_us(tweet_id)))
    assert decode(record.headers, record.value) == TweetPosted(tweet_id, 3, created_at_us(tweet_id))


# -- refusals -------------------------------------------------------------------------------------


@pytest.mark.parametrize("event_type", [TWEET_TYPE, FOLLOW_TYPE])
@pytest.mark.parametrize("garbage", [b"\xff", b"\x0a\xff\xff", b"\x08", b"\x1a\x05ab"])
def test_garbage_values_are_malformed(event_type: bytes, garbage: bytes) -> None:
    assert refused(headers(event_type), garbage) == "malformed"


@pytest.mark.parametrize("event_type", [TWEET_TYPE, FOLLOW_TYPE])
def test_a_record_without_a_value_is_malformed(event_type: bytes) -> None:
    assert refused(headers(event_type), None) == "malformed"


@pytest.mark.parametrize(
    "found",
    [
        None,
        [],
        headers(None),
        headers(b"socialgraph.v1.TweetDeleted"),
        headers(b"TweetCreated"),
        headers(b"socialgraph.v1.tweetcreated"),
        headers(b""),
        [("Event-Type", TWEET_TYPE), ("schema-version", b"1")],
    ],
    ids=["none", "empty", "missing", "other-message", "short-name", "wrong-case", "blank", "header-name-case"],
)
def test_missing_or_unknown_event_types_are_refused(found: Any) -> None:
    assert refused(found, tweet_value(1, 2)) == "unknown_type"


@pytest.mark.parametrize("version", [None, b"2", b"0", b"", b"1.0", b" 1"])
@pytest.mark.parametrize("event_type", [TWEET_TYPE, FOLLOW_TYPE])
def test_missing_or_unknown_schema_versions_are_refused(event_type: bytes, version: bytes | None) -> None:
    value = tweet_value(1, 2) if event_type == TWEET_TYPE else follow_value(pb.FOLLOW_EVENT_TYPE_FOLLOWED, 1, 2)
    assert refused(headers(event_type, version), value) == "unknown_version"


@pytest.mark.parametrize(("tweet_id", "author"), [(0, 2), (1, 0), (0, 0)])
def test_a_tweet_with_a_zero_id_is_malformed(tweet_id: int, author: int) -> None:
    assert refused(headers(TWEET_TYPE), tweet_value(tweet_id, author)) == "malformed"


def test_an_empty_tweet_value_is_malformed() -> None:
    """Every field at its default: IDs 0."""
    assert refused(headers(TWEET_TYPE), b"") == "malformed"


@pytest.mark.parametrize(("follower", "followee"), [(0, 2), (1, 0), (0, 0)])
def test_a_follow_event_with_a_zero_id_is_malformed(follower: int, followee: int) -> None:
    value = follow_value(pb.FOLLOW_EVENT_TYPE_FOLLOWED, follower, followee)
    assert refused(headers(FOLLOW_TYPE), value) == "malformed"


def test_a_self_follow_event_is_malformed() -> None:
    assert refused(headers(FOLLOW_TYPE), follow_value(pb.FOLLOW_EVENT_TYPE_FOLLOWED, 5, 5)) == "malformed"


@pytest.mark.parametrize("kind", [pb.FOLLOW_EVENT_TYPE_UNSPECIFIED, 3, 99])
def test_a_follow_event_of_unspecified_or_unknown_type_is_malformed(kind: int) -> None:
    assert refused(headers(FOLLOW_TYPE), follow_value(kind, 1, 2)) == "malformed"


def test_a_tweet_value_under_the_follow_header_is_not_taken_for_a_follow() -> None:
    """The header decides the message; a TweetCreated read as a FollowEvent has no valid shape."""
    assert refused(headers(FOLLOW_TYPE), tweet_value(1, 2)) == "malformed"


def test_the_refusal_names_its_reason_in_the_message() -> None:
    with pytest.raises(UnreadableEvent, match=r"^unknown_version: "):
        decode(headers(TWEET_TYPE, b"2"), tweet_value(1, 2))


@given(event_type=st.sampled_from([TWEET_TYPE, FOLLOW_TYPE]), value=st.binary(max_size=64))
def test_any_bytes_decode_to_a_valid_event_or_are_refused(event_type: bytes, value: bytes) -> None:
    """No input makes decode raise anything but UnreadableEvent, nor return an event with a bad ID."""
    outcome: TweetPosted | Follow | UnreadableEvent
    try:
        outcome = decode(headers(event_type), value)
    except UnreadableEvent as exc:
        outcome = exc
    if isinstance(outcome, UnreadableEvent):
        assert outcome.reason == "malformed"
    elif isinstance(outcome, TweetPosted):
        assert 0 < outcome.tweet_id <= MAX_ID
        assert 0 < outcome.author_id <= MAX_ID
    else:
        assert 0 < outcome.follower_id <= MAX_ID
        assert 0 < outcome.followee_id <= MAX_ID
        assert outcome.follower_id != outcome.followee_id


@pytest.mark.parametrize(
    "created_at",
    [{"seconds": 2**62}, {"seconds": -(2**62)}, {"seconds": 1, "nanos": -5}, {"seconds": 1, "nanos": 10**9}],
    ids=["after-9999", "before-year-1", "negative-nanos", "nanos-overflow"],
)
@pytest.mark.parametrize("event_type", [TWEET_TYPE, FOLLOW_TYPE])
def test_a_timestamp_protobuf_cannot_convert_is_malformed(event_type: bytes, created_at: dict[str, int]) -> None:
    """A timestamp outside what protobuf converts is a malformed record (skipped and counted), not
    a failure that stops the consumer at the same record after every restart."""
    stamp = Timestamp(**created_at)
    if event_type == TWEET_TYPE:
        value = pb.TweetCreated(tweet_id=1, author_id=2, created_at=stamp).SerializeToString()
    else:
        value = pb.FollowEvent(
            type=pb.FOLLOW_EVENT_TYPE_FOLLOWED, follower_id=1, followee_id=2, at=stamp
        ).SerializeToString()
    assert refused(headers(event_type), value) == "malformed"
