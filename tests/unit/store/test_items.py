"""The outgoing count's update: the cap condition counts a missing ``n`` as 0, whatever the delta; a
mute's items."""

from __future__ import annotations

from graph_service.domain.models import Mute
from graph_service.store import items as it
from graph_service.store.items import count_outgoing


def update(condition: str | None, delta: int, most: int | None = None) -> dict[str, object]:
    values = {":delta": {"N": str(delta)}} | ({} if most is None else {":most": {"N": str(most)}})
    element: dict[str, object] = {
        "TableName": "following",
        "Key": {"pk": {"N": "7"}, "sk": {"S": "O"}},
        "UpdateExpression": "ADD #n :delta",
        "ExpressionAttributeNames": {"#n": "n"},
        "ExpressionAttributeValues": values,
    }
    if condition is not None:
        element["ConditionExpression"] = condition
    return {"Update": element}


def test_a_follow_passes_a_missing_count_and_one_below_the_cap() -> None:
    """Follow's element (delta 1) as it always was: a user with no ``O`` item yet is at 0."""
    assert count_outgoing("following", 7, 1, cap=3) == update("attribute_not_exists(#n) OR #n <= :most", 1, 2)


def test_a_delta_up_to_the_cap_passes_a_missing_count() -> None:
    """ADD makes a missing n equal to delta: 3 rows of a new follower fit a cap of 3."""
    assert count_outgoing("following", 7, 3, cap=3) == update("attribute_not_exists(#n) OR #n <= :most", 3, 0)


def test_a_delta_past_the_cap_passes_no_count_not_even_a_missing_one() -> None:
    """4 rows of a new follower with a cap of 3: ``n <= -1`` alone, which neither a count nor a
    missing attribute meets (the defect: ``attribute_not_exists(#n) OR`` let it through to n = 4)."""
    assert count_outgoing("following", 7, 4, cap=3) == update("#n <= :most", 4, -1)
    assert count_outgoing("following", 7, 14, cap=1) == update("#n <= :most", 14, -13)


def test_no_cap_or_a_decrease_has_no_condition() -> None:
    assert count_outgoing("following", 7, 14) == update(None, 14)
    assert count_outgoing("following", 7, -2, cap=3) == update(None, -2)


def test_a_mute_item_round_trips_and_carries_its_ttl_only_with_an_end() -> None:
    """``expires_at`` is the end in epoch seconds rounded up: TTL never reclaims a mute still in force."""
    ended_on_a_second = Mute(9, 5, 2_000_000, True)
    just_after = Mute(9, 5, 2_000_001, False)
    forever = Mute(9, 5, 0, False)
    key = it.key(it.MUTE, 7, 9)
    assert it.mute_item(key, ended_on_a_second)["expires_at"] == {"N": "2"}
    assert it.mute_item(key, just_after)["expires_at"] == {"N": "3"}
    assert "expires_at" not in it.mute_item(key, forever)
    for mute in (ended_on_a_second, just_after, forever):
        assert it.parse_mute(it.mute_item(key, mute)) == mute
    assert it.order_key(it.MUTE_ORDER, 7, forever) == {"pk": {"N": "7"}, "sk": {"S": f"MT#{5:016d}#{9:020d}"}}
