"""A batch of edge changes is cut into chunks that each fit one transaction."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from counters.applier import MAX_USERS_PER_CHUNK, chunk_changes
from graph_service.store.changes import EdgeChange


def _users(chunk: list[EdgeChange]) -> set[int]:
    return {u for c in chunk for u in (c.follower_id, c.followee_id)}


def _change(follower: int, followee: int, seq: int) -> EdgeChange:
    return EdgeChange(follower, followee, seq, True, str(seq), str(seq))


changes_strategy = st.lists(
    st.tuples(st.integers(min_value=1, max_value=300), st.integers(min_value=1, max_value=300)), max_size=400
).map(lambda pairs: [_change(a, b, i) for i, (a, b) in enumerate(pairs)])


@given(changes_strategy, st.integers(min_value=2, max_value=120))
def test_chunks_never_exceed_the_user_limit(changes: list[EdgeChange], max_users: int) -> None:
    """Every chunk touches at most max_users users, and the chunks are the input, in order, with none empty."""
    chunks = chunk_changes(changes, max_users)
    assert all(chunk for chunk in chunks)
    assert [c for chunk in chunks for c in chunk] == changes
    for chunk in chunks:
        assert len(_users(chunk)) <= max_users


@given(changes_strategy, st.integers(min_value=2, max_value=120))
def test_chunks_are_only_cut_when_needed(changes: list[EdgeChange], max_users: int) -> None:
    """A chunk ends only where adding the next change would pass the limit (no needless transactions)."""
    chunks = chunk_changes(changes, max_users)
    for current, following in itertools.pairwise(chunks):
        assert len(_users([*current, following[0]])) > max_users


@given(changes_strategy)
def test_default_limit_leaves_room_in_a_transaction(changes: list[EdgeChange]) -> None:
    """With the default limit a chunk's counter updates plus a fence fit in one 100-item transaction."""
    assert MAX_USERS_PER_CHUNK < 100
    for chunk in chunk_changes(changes):
        assert len(_users(chunk)) <= MAX_USERS_PER_CHUNK


def test_chunking_a_fan_in_burst() -> None:
    """1,000 different followers of one account are split into chunks of max_users - 1 followers each."""
    changes = [_change(follower, 1, follower) for follower in range(2, 1002)]
    chunks = chunk_changes(changes, 90)
    assert [len(chunk) for chunk in chunks] == [89] * 11 + [21]
    assert all(len(_users(chunk)) <= 90 for chunk in chunks)


def test_repeated_pairs_share_a_chunk() -> None:
    """Changes between the same two users never force a new chunk."""
    changes = [_change(1, 2, i) for i in range(500)]
    assert chunk_changes(changes, 2) == [changes]


def test_no_changes_no_chunks() -> None:
    """An empty batch gives no chunks."""
    assert chunk_changes([]) == []
