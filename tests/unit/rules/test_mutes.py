"""Mute, Unmute and ListMutes as the rules apply them, on the in-memory graph (SPEC §3b)."""

from __future__ import annotations

import pytest

from graph_service.domain.errors import (
    DomainError,
    InvalidDuration,
    InvalidPageToken,
    InvalidUserId,
    SelfRelation,
    Unavailable,
)
from graph_service.domain.models import Direction, Mute
from graph_service.rules.graph import GraphRules
from graph_service.rules.limits import RuleLimits
from graph_service.rules.mutes import MAX_DURATION_NS, duration_ns
from tests.support.fakes.changes import RecordingChanges
from tests.support.fakes.graph import FakeGraph
from tests.support.rules import rules_on

SECOND_NS = 1_000_000_000


class Clock:
    """The rules' clock, moved by hand (``now_us`` of the modules that read the time)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now = 1_700_000_000_000_000
        for module in ("graph_service.rules.mutes", "graph_service.rules.graph_queries"):
            monkeypatch.setattr(f"{module}.now_us", lambda: self.now)

    def advance(self, seconds: float) -> None:
        self.now += int(seconds * 1_000_000)


@pytest.fixture
def graph() -> FakeGraph:
    return FakeGraph()


@pytest.fixture
def changes() -> RecordingChanges:
    return RecordingChanges()


@pytest.fixture
def rules(graph: FakeGraph, changes: RecordingChanges) -> GraphRules:
    return rules_on(graph, RuleLimits(page_token_secrets=("unit-test-secret",)), changes=changes)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    return Clock(monkeypatch)


async def muting(rules: GraphRules, muter: int, muted: int) -> tuple[bool, bool]:
    ((_, relationship),) = await rules.queries.get_relationships(muter, [muted])
    return relationship.muting, relationship.muting_notifications


async def listed(rules: GraphRules, user: int) -> list[Mute]:
    return list((await rules.mutes.list_mutes(user, 0, "")).entries)


async def test_a_mute_shows_in_relationships_and_the_list_one_way_only(rules: GraphRules, clock: Clock) -> None:
    await rules.mutes.mute(1, 2, 0, True)
    assert await muting(rules, 1, 2) == (True, True)
    assert await muting(rules, 2, 1) == (False, False)
    assert await listed(rules, 1) == [Mute(2, clock.now, 0, True)]
    assert await listed(rules, 2) == []


async def test_muting_changes_no_follow_and_no_count(rules: GraphRules, graph: FakeGraph) -> None:
    await rules.follows.follow(1, 2)
    await rules.follows.follow(2, 1)
    graph.settle_counts()
    before = await rules.queries.batch_get_counts([1, 2])
    await rules.mutes.mute(1, 2, 0, False)
    graph.settle_counts()
    assert await rules.queries.is_following(1, 2)
    assert await rules.queries.is_following(2, 1)
    after = await rules.queries.batch_get_counts([1, 2])
    assert [(u, c.followers, c.following) for u, c in after] == [(u, c.followers, c.following) for u, c in before]
    assert [(u, c.followers, c.following) for u, c in after] == [(1, 1, 1), (2, 1, 1)]
    ((_, relationship),) = await rules.queries.get_relationships(1, [2])
    assert (relationship.following, relationship.followed_by, relationship.muting) == (True, True, True)


async def test_a_repeat_replaces_duration_and_flag_and_keeps_when_it_was_made(rules: GraphRules, clock: Clock) -> None:
    await rules.mutes.mute(1, 2, 60 * SECOND_NS, True)
    made = clock.now
    clock.advance(10)
    await rules.mutes.mute(1, 2, 0, False)
    assert await listed(rules, 1) == [Mute(2, made, 0, False)]
    clock.advance(3600)
    assert await muting(rules, 1, 2) == (True, False)  # the repeat removed the end


async def test_a_mute_given_a_duration_ends_by_itself(rules: GraphRules, clock: Clock) -> None:
    """Not in force from its end on, in relationships and in the list, with nothing deleting it."""
    await rules.mutes.mute(1, 2, 30 * SECOND_NS, True)
    await rules.mutes.mute(1, 3, 0, False)
    clock.advance(29.999999)
    assert await muting(rules, 1, 2) == (True, True)
    clock.advance(0.000001)
    assert await muting(rules, 1, 2) == (False, False)
    assert [m.user_id for m in await listed(rules, 1)] == [3]


async def test_a_mute_made_again_after_its_end_is_a_new_one(rules: GraphRules, clock: Clock) -> None:
    await rules.mutes.mute(1, 2, SECOND_NS, False)
    clock.advance(5)
    await rules.mutes.mute(1, 2, 0, False)
    assert await listed(rules, 1) == [Mute(2, clock.now, 0, False)]


async def test_a_duration_is_rounded_up_never_to_forever(rules: GraphRules, clock: Clock) -> None:
    """A duration shorter than a microsecond still ends: one microsecond after the call."""
    await rules.mutes.mute(1, 2, 1, False)
    assert (await listed(rules, 1))[0].expires_us == clock.now + 1
    await rules.mutes.mute(1, 3, SECOND_NS + 1, False)
    assert [m.expires_us for m in await listed(rules, 1) if m.user_id == 3] == [clock.now + 1_000_001]


async def test_unmute_shows_the_account_again_and_is_idempotent(rules: GraphRules, changes: RecordingChanges) -> None:
    await rules.mutes.mute(1, 2, 0, True)
    await rules.mutes.unmute(1, 2)
    assert await muting(rules, 1, 2) == (False, False)
    assert await listed(rules, 1) == []
    changes.notices.clear()
    await rules.mutes.unmute(1, 2)
    await rules.mutes.unmute(1, 3)
    assert changes.notices == [("mute", 1, 2), ("mute", 1, 3)]


async def test_every_mute_and_unmute_settles_the_pair(rules: GraphRules, changes: RecordingChanges) -> None:
    """The muter's cached mute of the muted account is dropped before the call returns."""
    await rules.mutes.mute(1, 2, 0, False)
    await rules.mutes.mute(1, 2, 0, False)
    await rules.mutes.unmute(1, 2)
    assert changes.notices == [("mute", 1, 2)] * 3


async def test_the_list_is_newest_first_and_pages_with_tokens_bound_to_the_user(
    rules: GraphRules, clock: Clock
) -> None:
    for muted in range(10, 15):
        await rules.mutes.mute(1, muted, 0, False)
        clock.advance(1)
    first = await rules.mutes.list_mutes(1, 2, "")
    assert [m.user_id for m in first.entries] == [14, 13]
    second = await rules.mutes.list_mutes(1, 2, first.next_page_token)
    third = await rules.mutes.list_mutes(1, 2, second.next_page_token)
    assert [m.user_id for m in (*second.entries, *third.entries)] == [12, 11, 10]
    assert third.next_page_token == ""
    with pytest.raises(InvalidPageToken):
        await rules.mutes.list_mutes(2, 2, first.next_page_token)  # another user's token
    followers = await rules.queries.list_edges(Direction.FOLLOWERS, 1, 1, "")
    assert followers.next_page_token == ""  # no followers: make one to get a token of another query
    await rules.follows.follow(3, 1)
    await rules.follows.follow(4, 1)
    token = (await rules.queries.list_edges(Direction.FOLLOWERS, 1, 1, "")).next_page_token
    with pytest.raises(InvalidPageToken):
        await rules.mutes.list_mutes(1, 2, token)


async def test_mutes_that_ended_never_leave_an_empty_page_before_the_last(rules: GraphRules, clock: Clock) -> None:
    await rules.mutes.mute(1, 50, 0, False)
    for muted in range(51, 61):
        await rules.mutes.mute(1, muted, SECOND_NS, False)
    await rules.mutes.mute(1, 61, 0, False)
    clock.advance(2)
    first = await rules.mutes.list_mutes(1, 1, "")
    assert [m.user_id for m in first.entries] == [61]
    second = await rules.mutes.list_mutes(1, 1, first.next_page_token)
    assert ([m.user_id for m in second.entries], second.next_page_token) == ([50], "")


@pytest.mark.parametrize(
    ("muter", "muted", "duration_ns", "error", "field"),
    [
        (1, 1, 0, SelfRelation, None),
        (0, 2, 0, InvalidUserId, "muter_id"),
        (1, 0, 0, InvalidUserId, "muted_id"),
        (1, 2, -1, InvalidDuration, "duration"),
        (1, 2, MAX_DURATION_NS + 1, InvalidDuration, "duration"),
        (1, 2, 2**63 * SECOND_NS, InvalidDuration, "duration"),
    ],
    ids=["self", "muter-0", "muted-0", "negative", "over-100-years", "absurd"],
)
async def test_bad_mutes_are_refused_and_write_nothing(
    rules: GraphRules,
    changes: RecordingChanges,
    muter: int,
    muted: int,
    duration_ns: int,
    error: type[DomainError],
    field: str | None,
) -> None:
    with pytest.raises(error) as raised:
        await rules.mutes.mute(muter, muted, duration_ns, False)
    if field is not None:
        assert raised.value.metadata["field"] == field
    assert changes.notices == []
    assert await listed(rules, 1) == []


async def test_the_longest_duration_is_accepted(rules: GraphRules, clock: Clock) -> None:
    await rules.mutes.mute(1, 2, MAX_DURATION_NS, False)
    assert (await listed(rules, 1))[0].expires_us == clock.now + MAX_DURATION_NS // 1000


async def test_unmute_and_the_list_refuse_bad_ids(rules: GraphRules) -> None:
    with pytest.raises(SelfRelation):
        await rules.mutes.unmute(1, 1)
    with pytest.raises(InvalidUserId):
        await rules.mutes.unmute(0, 1)
    with pytest.raises(InvalidUserId):
        await rules.mutes.list_mutes(0, 0, "")


@pytest.mark.parametrize(
    ("seconds", "nanos", "expected"),
    [(0, 0, 0), (1, 5, 1_000_000_005), (-1, -5, -1_000_000_005), (0, -1, -1), (3600, 999_999_999, 3_600_999_999_999)],
)
def test_a_well_formed_duration_is_its_length_in_nanoseconds(seconds: int, nanos: int, expected: int) -> None:
    assert duration_ns(seconds, nanos) == expected


@pytest.mark.parametrize(("seconds", "nanos"), [(1, -5), (-1, 5), (0, 1_000_000_000), (0, -1_000_000_000)])
def test_a_duration_whose_seconds_and_nanos_disagree_is_refused(seconds: int, nanos: int) -> None:
    with pytest.raises(InvalidDuration):
        duration_ns(seconds, nanos)


async def test_a_mute_racing_another_mute_of_the_pair_decides_again_and_wins_with_its_own_values(
    rules: GraphRules, graph: FakeGraph, clock: Clock
) -> None:
    """The other mute lands between the read and the write: the write is refused, the pair is read
    again, and the repeat keeps that mute's muted_at with this call's duration and flag."""
    raced = False

    async def another_mute(write: str) -> None:
        nonlocal raced
        if write == "put_mute" and not raced:
            raced = True
            graph.mutes[(1, 2)] = Mute(2, clock.now - 50, 0, True)

    graph.before_write = another_mute
    await rules.mutes.mute(1, 2, 60 * SECOND_NS, False)
    assert graph.mutes[(1, 2)] == Mute(2, clock.now - 50, clock.now + 60_000_000, False)
    assert graph.writes == 2


async def test_an_unmute_racing_a_mute_removes_what_it_finds_on_the_second_read(
    rules: GraphRules, graph: FakeGraph, clock: Clock
) -> None:
    await rules.mutes.mute(1, 2, 0, False)
    raced = False

    async def remade(write: str) -> None:
        nonlocal raced
        if write == "remove_mute" and not raced:
            raced = True
            graph.mutes[(1, 2)] = Mute(2, clock.now + 1, 0, True)

    graph.before_write = remade
    await rules.mutes.unmute(1, 2)
    assert (1, 2) not in graph.mutes
    assert await muting(rules, 1, 2) == (False, False)


async def test_a_mute_that_keeps_losing_races_is_unavailable(rules: GraphRules, graph: FakeGraph) -> None:
    """Every write is refused (the pair keeps changing): after 8 rounds UNAVAILABLE, safe to retry."""

    async def always_another(write: str) -> None:
        graph.mutes[(1, 2)] = Mute(2, graph.writes, 0, False)

    graph.before_write = always_another
    with pytest.raises(Unavailable):
        await rules.mutes.mute(1, 2, 0, True)
    with pytest.raises(Unavailable):
        await rules.mutes.unmute(1, 2)


async def test_ids_are_checked_before_the_duration(rules: GraphRules) -> None:
    with pytest.raises(SelfRelation):
        await rules.mutes.mute_for(1, 1, -1, 0, False)
    with pytest.raises(InvalidUserId):
        await rules.mutes.mute_for(0, 2, 1, -1, False)
    with pytest.raises(InvalidDuration):
        await rules.mutes.mute_for(1, 2, 1, -1, False)
    await rules.mutes.mute_for(1, 2, 3600, 0, True)
    assert await muting(rules, 1, 2) == (True, True)
