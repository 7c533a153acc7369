"""Stream records of the followers table become edge changes, and name the pairs whose other items (requests,
blocks, mutes, privacy) changed."""

from __future__ import annotations

from typing import Any

import pytest

from graph_service.domain.models import Mute
from graph_service.store.changes import EdgeChange, edge_change, edge_changes, touched_pairs
from tests.support.mute_records import mute_record


def _image(pk: int, sk: str, other: int, at: int) -> dict[str, Any]:
    return {"pk": {"N": str(pk)}, "sk": {"S": sk}, "other": {"N": str(other)}, "at": {"N": str(at)}}


def record(
    event: str,
    followee: int,
    follower: int,
    at: int = 1_700_000_000_000_001,
    *,
    sequence: str = "100",
    event_id: str | None = "evt-1",
    ordering_item: bool = False,
) -> dict[str, Any]:
    """A DynamoDB Streams record (NEW_AND_OLD_IMAGES) of one followers-table item, as GetRecords returns it."""
    sk = f"T#{at:016d}#{follower:020d}" if ordering_item else f"E#{follower:020d}"
    image = _image(followee, sk, follower, at)
    data: dict[str, Any] = {
        "Keys": {"pk": image["pk"], "sk": image["sk"]},
        "SequenceNumber": sequence,
        "SizeBytes": 100,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    }
    if event in {"INSERT", "MODIFY"}:
        data["NewImage"] = image
    if event in {"REMOVE", "MODIFY"}:
        data["OldImage"] = image
    out: dict[str, Any] = {"eventName": event, "eventVersion": "1.1", "eventSource": "aws:dynamodb", "dynamodb": data}
    if event_id is not None:
        out["eventID"] = event_id
    return out


def test_insert_of_a_membership_item_is_a_follow() -> None:
    """An INSERT of an E# item is an added edge from the image's other user to the partition's user."""
    change = edge_change(record("INSERT", followee=2, follower=1, at=123, sequence="555", event_id="abc"))
    assert change == EdgeChange(follower_id=1, followee_id=2, at_us=123, added=True, sequence="555", event_id="abc")


def test_remove_of_a_membership_item_is_an_unfollow() -> None:
    """A REMOVE of an E# item is a removed edge, read from the old image."""
    change = edge_change(record("REMOVE", followee=2, follower=1, at=123, sequence="556", event_id="def"))
    assert change == EdgeChange(follower_id=1, followee_id=2, at_us=123, added=False, sequence="556", event_id="def")


def test_modify_is_ignored() -> None:
    """A MODIFY record changes no membership and is ignored."""
    assert edge_change(record("MODIFY", followee=2, follower=1)) is None


@pytest.mark.parametrize("event", ["INSERT", "REMOVE", "MODIFY"])
def test_ordering_items_are_ignored(event: str) -> None:
    """Records of the T# ordering items of the same transaction are ignored."""
    assert edge_change(record(event, followee=2, follower=1, ordering_item=True)) is None


def test_unknown_event_names_and_shapes_are_ignored() -> None:
    """A record with no or an unknown event name is ignored rather than failing the batch."""
    assert edge_change({"eventName": "TTL", "dynamodb": {}}) is None
    assert edge_change({}) is None


def test_record_without_an_image_is_ignored() -> None:
    """An E# record that carries no image (a keys-only stream) yields no change."""
    bare = record("INSERT", followee=2, follower=1)
    del bare["dynamodb"]["NewImage"]
    assert edge_change(bare) is None


def test_missing_event_id_falls_back_to_the_sequence_number() -> None:
    """Without an eventID the sequence number identifies the change."""
    change = edge_change(record("INSERT", followee=2, follower=1, sequence="777", event_id=None))
    assert change is not None
    assert change.event_id == "777"


def test_largest_user_ids_are_parsed_exactly() -> None:
    """User IDs up to 2**64-1 are parsed without loss."""
    big = 2**64 - 1
    change = edge_change(record("INSERT", followee=big, follower=big - 1))
    assert change is not None
    assert (change.follower_id, change.followee_id) == (big - 1, big)


def test_lambda_event_records_parse_like_get_records() -> None:
    """A record in a Lambda event's shape (extra awsRegion/eventSourceARN fields) parses the same."""
    plain = record("INSERT", followee=2, follower=1)
    lambda_shaped = {
        **plain,
        "awsRegion": "us-east-1",
        "eventSourceARN": "arn:aws:dynamodb:us-east-1:1:table/sg_followers/stream/x",
    }
    assert edge_change(lambda_shaped) == edge_change(plain)


def test_edge_changes_keeps_order_and_drops_ignored_records() -> None:
    """edge_changes returns the membership changes of a batch in stream order, skipping the rest."""
    batch = [
        record("INSERT", followee=2, follower=1, sequence="1"),
        record("INSERT", followee=2, follower=1, sequence="2", ordering_item=True),
        record("INSERT", followee=3, follower=1, sequence="3"),
        record("MODIFY", followee=3, follower=1, sequence="4"),
        record("REMOVE", followee=2, follower=1, sequence="5"),
        record("REMOVE", followee=2, follower=1, sequence="6", ordering_item=True),
    ]
    changes = edge_changes(batch)
    assert [(c.sequence, c.followee_id, c.added) for c in changes] == [("1", 2, True), ("3", 3, True), ("5", 2, False)]
    assert edge_changes([]) == []


def test_deltas_count_both_users() -> None:
    """A follow adds one follower to the followee and one following to the follower; an unfollow takes them away."""
    follow = EdgeChange(follower_id=1, followee_id=2, at_us=5, added=True, sequence="1", event_id="a")
    unfollow = EdgeChange(follower_id=1, followee_id=2, at_us=5, added=False, sequence="2", event_id="b")
    assert sorted(follow.deltas()) == [(1, 0, 1), (2, 1, 0)]
    assert sorted(unfollow.deltas()) == [(1, 0, -1), (2, -1, 0)]


def _keys_only(pk: int, sk: str) -> dict[str, Any]:
    return {"eventName": "INSERT", "dynamodb": {"Keys": {"pk": {"N": str(pk)}, "sk": {"S": sk}}, "SequenceNumber": "1"}}


def test_request_block_and_settings_records_touch_their_pairs_and_never_count() -> None:
    records = [
        _keys_only(7, f"R#{3:020d}"),  # 3 asked to follow 7
        _keys_only(7, f"RT#{1:016d}#{3:020d}"),  # its ordering item: nothing more
        _keys_only(9, f"B#{4:020d}"),  # 9 blocks 4
        _keys_only(5, "P"),  # 5 changed its privacy
        _keys_only(7, f"R#{3:020d}"),  # the same pair again: reported once
    ]
    assert touched_pairs(records) == [(3, 7), (4, 9), (5, 5)]
    assert edge_changes(records) == []


def test_edge_records_touch_no_pair() -> None:
    assert touched_pairs([record("INSERT", 2, 1), record("REMOVE", 2, 1, ordering_item=True)]) == []


@pytest.mark.parametrize("event", ["INSERT", "MODIFY", "REMOVE", "TTL"])
def test_mute_records_touch_the_muters_pair_and_never_count(event: str) -> None:
    """An ``M#`` change (a mute, a replace, an unmute, a TTL deletion) names the pair (muted, muter),
    as a block does; its ``MT#`` order item adds nothing; neither is an edge change."""
    mute = Mute(4, 1_700_000_000_000_000, 1_700_000_060_000_000, True)
    name, ttl = ("REMOVE", True) if event == "TTL" else (event, False)
    records = [mute_record(name, 9, mute, ttl=ttl), mute_record(name, 9, mute, order=True, ttl=ttl)]
    assert touched_pairs(records) == [(4, 9)]
    assert edge_changes(records) == []
    assert [edge_change(r) for r in records] == [None, None]


def test_every_pair_item_kind_names_its_pair_by_its_own_prefix() -> None:
    big = 2**64 - 1
    records = [_keys_only(7, f"M#{big:020d}"), _keys_only(8, f"B#{big:020d}"), _keys_only(9, f"R#{big:020d}")]
    assert touched_pairs(records) == [(big, 7), (big, 8), (big, 9)]


def _marked(event: str, followee: int, follower: int, at: int, **marks: int) -> dict[str, Any]:
    """An ``E#`` record whose image carries an account job's marks (``arch``, ``rest``)."""
    marked = record(event, followee, follower, at)
    for image in ("NewImage", "OldImage"):
        if image in marked["dynamodb"]:
            marked["dynamodb"][image] = {**marked["dynamodb"][image], **{k: {"N": str(v)} for k, v in marks.items()}}
    return marked


@pytest.mark.parametrize("marks", [{"arch": 3}, {"arch": 5, "rest": 4}], ids=["archived", "restored-then-archived"])
def test_an_edge_archived_or_deleted_with_an_account_is_still_counted_as_removed(marks: dict[str, int]) -> None:
    """SPEC §3b: an archived edge is gone from the counts (only the relay leaves it out: no FollowEvent)."""
    change = edge_change(_marked("REMOVE", 2, 1, 123, **marks))
    assert change is not None
    assert (change.follower_id, change.followee_id, change.at_us, change.added) == (1, 2, 123, False)
    assert sorted(change.deltas()) == [(1, 0, -1), (2, -1, 0)]


def test_an_edge_a_restore_put_back_is_counted_again() -> None:
    change = edge_change(_marked("INSERT", 2, 1, 123, rest=4))
    assert change is not None
    assert (change.follower_id, change.followee_id, change.at_us, change.added) == (1, 2, 123, True)


def test_the_account_lifecycles_items_count_nothing_and_touch_no_pair() -> None:
    """The state item, archived items (edges and requests) and the jobs' registry (pk=0), made or gone."""
    images = [
        {"pk": {"N": "7"}, "sk": {"S": "A"}, "st": {"S": "d"}, "gen": {"N": "1"}, "at": {"N": "5"}},
        _image(7, f"X#F#{3:020d}", 3, 5),
        _image(7, f"X#R#{4:020d}", 4, 5),
        {"pk": {"N": "0"}, "sk": {"S": f"J#{7:020d}"}, "gen": {"N": "1"}},
    ]
    records = []
    for event in ("INSERT", "REMOVE"):
        for image in images:
            keys = {"pk": image["pk"], "sk": image["sk"]}
            shown = "NewImage" if event == "INSERT" else "OldImage"
            records.append({"eventName": event, "dynamodb": {"Keys": keys, shown: image, "SequenceNumber": "1"}})
    assert edge_changes(records) == []
    assert touched_pairs(records) == []
