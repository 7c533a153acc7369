"""The note a committed chunk leaves for the cache repair survives a round trip."""

from __future__ import annotations

from counters.repairs import decode_note, encode_note
from graph_service.store.changes import EdgeChange


def test_note_round_trips_the_changes() -> None:
    """encode_note/decode_note keep who, whom, when and which way (sequence and event ID are not kept)."""
    changes = [
        EdgeChange(1, 2, 10, True, "1", "a"),
        EdgeChange(2**64 - 1, 3, 11, False, "2", "b"),
    ]
    decoded = decode_note(encode_note(changes))
    assert [(c.follower_id, c.followee_id, c.at_us, c.added) for c in decoded] == [
        (1, 2, 10, True),
        (2**64 - 1, 3, 11, False),
    ]
    assert decode_note("") == []
    assert decode_note(encode_note([])) == []
