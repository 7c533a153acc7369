"""A relationship's cache values (its six flags, and its mute under a key of its own) round-trip,
the flags keep the format every release reads, and a mute that has ended is left out as of its end."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from graph_service.domain.models import Relationship

FLAGS = st.tuples(*(st.booleans() for _ in Relationship.FLAGS))
MUTES = st.none() | st.tuples(st.integers(min_value=0, max_value=2**62), st.booleans())  # (end, notifications)
RELATIONSHIPS = st.builds(lambda flags, mute: Relationship(*flags, *(mute or (None, False))), FLAGS, MUTES)


@given(RELATIONSHIPS)
def test_the_cache_values_round_trip(relationship: Relationship) -> None:
    assert Relationship.decode(relationship.encode()).with_mute(relationship.encode_mute()) == relationship


@given(RELATIONSHIPS)
def test_the_flags_are_six_characters_whatever_the_mute(relationship: Relationship) -> None:
    """The value a release before mutes reads and writes under the same key."""
    flags = relationship.encode()
    assert len(flags) == 6
    assert set(flags) <= {"0", "1"}


def test_no_mute_is_its_own_value() -> None:
    assert Relationship(following=True).encode_mute() == "-"
    muted = Relationship(mute_expires_us=5, muting_notifications=True)
    assert muted.with_mute("-") == Relationship()


def test_a_mute_is_in_force_until_its_end_and_forever_without_one() -> None:
    ending = Relationship(following=True, mute_expires_us=100, muting_notifications=True)
    assert ending.as_of(99) == ending
    assert ending.as_of(100) == Relationship(following=True)
    forever = Relationship(mute_expires_us=0)
    assert forever.as_of(2**62).muting
