"""The relay's sources: what a committed change of each table becomes, and one topic per source."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from graph_service.domain.models import Mute
from graph_service.domain.tweet_ids import TweetIdGenerator, created_at_us
from graph_service.events.kinds import KINDS, AccountChange, AccountChanged, Follow, TweetPosted, decode, encode
from graph_service.events.records import OutgoingRecord
from relay.sources import SOURCES, graph_events, tweet_events
from tests.support.mute_records import mute_record

AT_US = 1_700_000_000_123_456


# -- the list of sources ---------------------------------------------------------------------------


def test_every_kind_of_event_has_a_producer() -> None:
    """A kind no source makes would never reach Kafka: its converter belongs in a ``Source``."""
    produced = [kind for source in SOURCES for kind in source.kinds]
    assert {kind.name for kind in produced} == {kind.name for kind in KINDS}


def test_each_source_reads_its_own_table_and_produces_to_one_topic() -> None:
    assert len({source.table for source in SOURCES}) == len(SOURCES)
    for source in SOURCES:
        assert {kind.topic for kind in source.kinds} == {source.topic}


# -- the converters ------------------------------------------------------------------------------


def stream_record(event: str, keys: dict[str, Any], image: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A DynamoDB Streams record (NEW_AND_OLD_IMAGES), as GetRecords returns it."""
    data: dict[str, Any] = {
        "Keys": keys,
        "SequenceNumber": "000000000000000000042",
        "SizeBytes": 80,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
        **extra,
    }
    if event in {"INSERT", "MODIFY"}:
        data["NewImage"] = image
    if event in {"REMOVE", "MODIFY"}:
        data["OldImage"] = image
    return {"eventID": "e1", "eventName": event, "eventSource": "aws:dynamodb", "dynamodb": data}


def tweet_item(tweet_id: int, author: int, text: str = "hi") -> dict[str, Any]:
    return {"tweet_id": {"N": str(tweet_id)}, "author_id": {"N": str(author)}, "text": {"S": text}}


def tweet_stream_record(event: str, tweet_id: int, author: int) -> dict[str, Any]:
    return stream_record(event, {"tweet_id": {"N": str(tweet_id)}}, tweet_item(tweet_id, author))


def edge_item(followee: int, sort_key: str, other: int, at: int = AT_US) -> tuple[dict[str, Any], dict[str, Any]]:
    keys = {"pk": {"N": str(followee)}, "sk": {"S": sort_key}}
    return keys, {**keys, "other": {"N": str(other)}, "at": {"N": str(at)}}


def edge_stream_record(event: str, followee: int, sort_key: str, other: int, **extra: Any) -> dict[str, Any]:
    keys, image = edge_item(followee, sort_key, other)
    return stream_record(event, keys, image, **extra)


def test_an_inserted_tweet_is_one_tweet_created_with_the_time_of_its_id() -> None:
    tweet_id = TweetIdGenerator(worker=2).next_id()
    events = tweet_events(tweet_stream_record("INSERT", tweet_id, 77))
    assert events == [encode(TweetPosted(tweet_id, 77, created_at_us(tweet_id)))]
    assert decode(events[0].headers, events[0].value) == TweetPosted(tweet_id, 77, created_at_us(tweet_id))


@pytest.mark.parametrize("event", ["MODIFY", "REMOVE"])
def test_an_edited_or_deleted_tweet_is_no_event(event: str) -> None:
    assert tweet_events(tweet_stream_record(event, 123, 77)) == []


def test_a_tweet_insert_without_a_new_image_is_no_event() -> None:
    record = tweet_stream_record("INSERT", 123, 77)
    del record["dynamodb"]["NewImage"]
    assert tweet_events(record) == []


def follow_of(events: list[OutgoingRecord]) -> list[Follow]:
    found = []
    for event in events:
        decoded = decode(event.headers, event.value)
        assert isinstance(decoded, Follow)
        assert event.key == str(decoded.followee_id).encode()
        found.append(decoded)
    return found


def test_an_inserted_membership_item_is_followed_at_the_edge_time() -> None:
    events = graph_events(edge_stream_record("INSERT", 2, f"E#{1:020d}", 1))
    assert follow_of(events) == [Follow(1, 2, True, AT_US)]
    assert events[0].key == b"2"


@pytest.mark.parametrize(
    "created",
    [datetime(2024, 5, 1, 12, 0, 7, tzinfo=UTC), 1_714_564_807.0, 1_714_564_807],
    ids=["datetime", "float", "int"],
)
def test_a_removed_membership_item_is_unfollowed_at_the_removal_time(created: Any) -> None:
    """boto3 gives ApproximateCreationDateTime as a datetime; a Lambda event as epoch seconds."""
    record = edge_stream_record("REMOVE", 2, f"E#{1:020d}", 1, ApproximateCreationDateTime=created)
    assert follow_of(graph_events(record)) == [Follow(1, 2, False, 1_714_564_807_000_000)]


def test_a_modified_membership_item_is_no_event() -> None:
    assert graph_events(edge_stream_record("MODIFY", 2, f"E#{1:020d}", 1)) == []


@pytest.mark.parametrize("event", ["INSERT", "MODIFY", "REMOVE"])
@pytest.mark.parametrize(
    "sort_key",
    [f"T#{AT_US}#{1:020d}", f"R#{1:020d}", f"RT#{AT_US}#{1:020d}", f"B#{1:020d}", "P"],
    ids=["edge-order", "request", "request-order", "block", "privacy"],
)
def test_items_that_are_not_edges_are_no_events(event: str, sort_key: str) -> None:
    record = edge_stream_record(event, 2, sort_key, 1, ApproximateCreationDateTime=1_714_564_807.0)
    if sort_key == "P":  # the settings item has no other/at
        for image in ("NewImage", "OldImage"):
            if image in record["dynamodb"]:
                record["dynamodb"][image] = {**record["dynamodb"]["Keys"], "private": {"BOOL": True}}
    assert graph_events(record) == []


@pytest.mark.parametrize("event", ["INSERT", "MODIFY", "REMOVE", "TTL"])
@pytest.mark.parametrize("order", [False, True], ids=["mute", "mute-order"])
def test_mute_items_and_their_ttl_deletions_are_no_events(event: str, order: bool) -> None:
    """A mute, a replace, an unmute or DynamoDB's TTL reclaiming an ended mute: no FollowEvent."""
    name, ttl = ("REMOVE", True) if event == "TTL" else (event, False)
    mute = Mute(1, AT_US, AT_US + 60_000_000, True)
    assert graph_events(mute_record(name, 2, mute, order=order, ttl=ttl)) == []


def test_a_tweets_record_is_not_a_graph_event() -> None:
    assert graph_events(tweet_stream_record("INSERT", 123, 77)) == []


# -- the account lifecycle (SPEC §5: an AccountEvent, and no FollowEvent for what a job moves) -------


def marked_edge_record(event: str, marks: dict[str, int], **extra: Any) -> dict[str, Any]:
    """An ``E#`` record (2 followed by 1) whose image carries a job's marks (``arch``, ``rest``)."""
    record = edge_stream_record(event, 2, f"E#{1:020d}", 1, **extra)
    for image in ("NewImage", "OldImage"):
        if image in record["dynamodb"]:
            record["dynamodb"][image].update({name: {"N": str(gen)} for name, gen in marks.items()})
    return record


@pytest.mark.parametrize("marks", [{"arch": 3}, {"arch": 5, "rest": 4}], ids=["archived", "restored-then-archived"])
def test_a_removal_an_accounts_job_marked_is_no_follow_event(marks: dict[str, int]) -> None:
    """Archived or deleted with the account (the mark set just before the removal)."""
    assert graph_events(marked_edge_record("REMOVE", marks, ApproximateCreationDateTime=1_714_564_807.0)) == []


def test_an_edge_a_restore_put_back_is_no_follow_event() -> None:
    assert graph_events(marked_edge_record("INSERT", {"rest": 4})) == []


def test_an_unfollow_of_a_restored_edge_is_an_unfollowed_event() -> None:
    record = marked_edge_record("REMOVE", {"rest": 4}, ApproximateCreationDateTime=1_714_564_807.0)
    assert follow_of(graph_events(record)) == [Follow(1, 2, False, 1_714_564_807_000_000)]


def test_an_archive_mark_being_set_is_no_event() -> None:
    """The job's mark is a MODIFY of the live edge: no event either way."""
    record = marked_edge_record("MODIFY", {})
    record["dynamodb"]["NewImage"] = {**record["dynamodb"]["OldImage"], "arch": {"N": "3"}}
    assert graph_events(record) == []


def state_image(user: int, state: str, gen: int, *, at: int = AT_US, done: int = 0, total: int = 0) -> dict[str, Any]:
    """The account's state item (``followers`` pk=U, sk=A) as ``DynamoAccounts`` writes it."""
    return {
        "pk": {"N": str(user)},
        "sk": {"S": "A"},
        "st": {"S": state},
        "gen": {"N": str(gen)},
        "done": {"N": str(done)},
        "total": {"N": str(total)},
        "at": {"N": str(at)},
        "prev": {"S": "a"},
    }


def state_record(event: str, new: dict[str, Any] | None, old: dict[str, Any] | None) -> dict[str, Any]:
    image = new if new is not None else old
    assert image is not None
    record = stream_record(event, {"pk": image["pk"], "sk": image["sk"]}, image)
    for name, value in (("NewImage", new), ("OldImage", old)):
        if value is None:
            record["dynamodb"].pop(name, None)
        else:
            record["dynamodb"][name] = value
    return record


def account_of(events: list[OutgoingRecord]) -> list[AccountChanged]:
    found = []
    for event in events:
        decoded = decode(event.headers, event.value)
        assert isinstance(decoded, AccountChanged)
        assert event.key == str(decoded.user_id).encode()
        found.append(decoded)
    return found


BIG = 2**64 - 1


@pytest.mark.parametrize(
    ("state", "change", "before"),
    [("d", AccountChange.DEACTIVATED, "a"), ("r", AccountChange.REACTIVATED, "D"), ("x", AccountChange.DELETED, "d")],
    ids=["deactivated", "reactivated", "deleted"],
)
def test_a_state_written_at_a_new_generation_is_an_account_event_keyed_by_the_user(
    state: str, change: AccountChange, before: str
) -> None:
    """The first change INSERTs the state item; every later one MODIFYs it at the next generation
    (``before``: the state it changes from). The event's time is the change's ``at``, not the
    stream record's."""
    first = state_record("INSERT", state_image(BIG, state, 1, at=AT_US), None)
    assert account_of(graph_events(first)) == [AccountChanged(BIG, change, AT_US)]
    later = state_record("MODIFY", state_image(7, state, 5, at=AT_US + 9), state_image(7, before, 4, done=3, total=3))
    events = graph_events(later)
    assert account_of(events) == [AccountChanged(7, change, AT_US + 9)]
    assert events[0].key == b"7"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (("d", 0, 0), ("d", 0, 10)),  # the job found how many items it has
        (("d", 0, 10), ("d", 4, 10)),  # a batch moved
        (("d", 10, 10), ("D", 10, 10)),  # the deactivation's job ended
        (("r", 3, 3), ("a", 3, 3)),  # the restore ended
        (("x", 8, 8), ("X", 8, 8)),  # the deletion ended
    ],
    ids=["total", "progress", "deactivated", "active", "deleted"],
)
def test_a_jobs_progress_or_end_at_the_same_generation_is_no_event(
    old: tuple[str, int, int], new: tuple[str, int, int]
) -> None:
    (old_state, old_done, old_total), (new_state, new_done, new_total) = old, new
    record = state_record(
        "MODIFY",
        state_image(7, new_state, 2, done=new_done, total=new_total),
        state_image(7, old_state, 2, done=old_done, total=old_total),
    )
    assert graph_events(record) == []


def test_a_removed_state_item_is_no_event() -> None:
    assert graph_events(state_record("REMOVE", None, state_image(7, "X", 3))) == []


@pytest.mark.parametrize("event", ["INSERT", "MODIFY", "REMOVE"])
@pytest.mark.parametrize("sort_key", [f"X#F#{1:020d}", f"X#Q#{1:020d}"], ids=["archived-edge", "archived-request"])
def test_archived_items_are_no_events(event: str, sort_key: str) -> None:
    """An archived item appearing, moving to the other account or going (restored, dropped)."""
    record = edge_stream_record(event, 2, sort_key, 1, ApproximateCreationDateTime=1_714_564_807.0)
    assert graph_events(record) == []


@pytest.mark.parametrize("event", ["INSERT", "MODIFY", "REMOVE"])
def test_the_jobs_registry_is_no_event(event: str) -> None:
    """pk=0 is nobody's: a job's registration, lease and end."""
    keys = {"pk": {"N": "0"}, "sk": {"S": f"J#{7:020d}"}}
    image = {**keys, "gen": {"N": "2"}, "owner": {"S": "w1"}, "until": {"N": "123"}}
    assert graph_events(stream_record(event, keys, image)) == []
