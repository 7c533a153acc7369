"""The pair invariants on views of items: each kind from its smallest example, and nothing from what was not read."""

from __future__ import annotations

from typing import Any

from graph_service.domain.models import Edge
from graph_service.dynamodb.tables import FOLLOWERS, FOLLOWING
from graph_service.operations.fsck_pairs import (
    ItemKey,
    PairView,
    evaluate,
    first_look_keys,
    implied_orders,
    member_key,
    member_keys,
    pair_items,
    parse_sk,
    request_partners,
)
from graph_service.operations.fsck_report import Violation
from graph_service.store import items as it

F, G = 7, 9  # F follows G
T = 1_764_000_000_000_000
EVERYWHERE = frozenset({(FOLLOWERS, F), (FOLLOWERS, G), (FOLLOWING, F), (FOLLOWING, G)})


def order(table: str, owner: int, prefix: str, other: int, at: int) -> ItemKey:
    return table, owner, f"{prefix}{Edge(other, at).position}"


def edge(follower: int = F, followee: int = G, at: int = T, at_mirror: int | None = None) -> dict[ItemKey, int]:
    mirror = at if at_mirror is None else at_mirror
    return {
        member_key(FOLLOWERS, followee, it.EDGE, follower): at,
        order(FOLLOWERS, followee, it.EDGE_ORDER, follower, at): at,
        member_key(FOLLOWING, follower, it.EDGE, followee): mirror,
        order(FOLLOWING, follower, it.EDGE_ORDER, followee, mirror): mirror,
    }


def request(requester: int = F, user: int = G, at: int = T, at_mirror: int | None = None) -> dict[ItemKey, int]:
    return {
        member_key(FOLLOWERS, user, it.REQUEST, requester): at,
        order(FOLLOWERS, user, it.REQUEST_ORDER, requester, at): at,
        member_key(FOLLOWING, requester, it.REQUEST, user): at if at_mirror is None else at_mirror,
    }


def block(blocker: int, blocked: int) -> dict[ItemKey, int]:
    return {member_key(FOLLOWERS, blocker, it.BLOCK, blocked): T}


def kinds(
    found: dict[ItemKey, int], *, complete: frozenset[tuple[str, int]] = EVERYWHERE
) -> set[tuple[str, int, int | None]]:
    return {(v.kind, v.user, v.other) for v in evaluate(PairView(F, G, found, complete=complete))}


def without(found: dict[ItemKey, int], *gone: ItemKey) -> dict[ItemKey, int]:
    return {k: v for k, v in found.items() if k not in gone}


def test_whole_follows_requests_and_blocks_are_clean() -> None:
    assert kinds(edge()) == set()
    assert kinds({**edge(), **edge(G, F, T + 1)}) == set()
    assert kinds(request()) == set()
    assert kinds({**request(), **edge(G, F)}) == set()  # a request one way, a follow the other
    assert kinds(block(F, G)) == set()
    assert kinds({**block(F, G), **block(G, F)}) == set()


def test_a_follow_in_one_table_only_is_one_sided_at_the_owner_of_the_item() -> None:
    followers_only = without(edge(), member_key(FOLLOWING, F, it.EDGE, G), order(FOLLOWING, F, it.EDGE_ORDER, G, T))
    following_only = without(edge(), member_key(FOLLOWERS, G, it.EDGE, F), order(FOLLOWERS, G, it.EDGE_ORDER, F, T))
    assert kinds(followers_only) == {("edge_one_sided", G, F)}
    assert kinds(following_only) == {("edge_one_sided", F, G)}


def test_what_was_not_read_is_never_taken_for_missing() -> None:
    followers_only = without(edge(), member_key(FOLLOWING, F, it.EDGE, G), order(FOLLOWING, F, it.EDGE_ORDER, G, T))
    assert kinds(followers_only, complete=frozenset({(FOLLOWERS, G)})) == set()
    looked = frozenset({member_key(FOLLOWING, F, it.EDGE, G)})
    view = PairView(F, G, followers_only, looked=looked, complete=frozenset({(FOLLOWERS, G)}))
    assert [v.kind for v in evaluate(view)] == ["edge_one_sided"]


def test_two_times_of_one_follow_are_a_mismatch_reported_at_the_followee() -> None:
    (violation,) = evaluate(PairView(F, G, edge(at_mirror=T + 5), complete=EVERYWHERE))
    assert violation == Violation(
        "edge_time_mismatch",
        G,
        F,
        f"followers pk={G} E#{F} at {T}, following pk={F} E#{G} at {T + 5}",
    )


def test_order_items_must_pair_with_membership_items_at_the_same_time() -> None:
    no_order = without(edge(), order(FOLLOWERS, G, it.EDGE_ORDER, F, T))
    assert kinds(no_order) == {("order_unpaired", G, F)}
    lone_order = {order(FOLLOWING, F, it.EDGE_ORDER, G, T): T}
    assert kinds(lone_order) == {("order_unpaired", F, G)}
    moved = {
        **without(edge(), order(FOLLOWERS, G, it.EDGE_ORDER, F, T)),
        order(FOLLOWERS, G, it.EDGE_ORDER, F, T + 1): T,
    }
    details = sorted(v.detail for v in evaluate(PairView(F, G, moved, complete=EVERYWHERE)))
    assert details == [
        f"followers pk={G} E#{F} (at {T}) has no T#",
        f"followers pk={G} T#{T + 1}#{F} has no E#{F} at that time (E#{F} is at {T})",
    ]
    assert kinds(without(request(), order(FOLLOWERS, G, it.REQUEST_ORDER, F, T))) == {("order_unpaired", G, F)}
    assert kinds({order(FOLLOWERS, G, it.REQUEST_ORDER, F, T): T}) == {("order_unpaired", G, F)}


def test_an_edge_and_a_request_in_one_direction() -> None:
    assert kinds({**edge(), **request(at=T + 1)}) == {("edge_and_request", G, F)}


def test_nothing_may_cross_a_block_in_either_direction() -> None:
    assert kinds({**block(G, F), **edge()}) == {("across_block", G, F)}
    assert kinds({**block(F, G), **edge()}) == {("across_block", F, G)}
    assert kinds({**block(F, G), **request()}) == {("across_block", F, G)}
    assert kinds({**block(G, F), **edge(G, F)}) == {("across_block", G, F)}
    (violation,) = evaluate(PairView(F, G, {**block(G, F), **request()}, complete=EVERYWHERE))
    assert violation.detail == f"{G} blocks {F}, yet: followers pk={G} R#{F}"


def test_an_accounts_items_about_itself_are_not_judged_as_a_pair() -> None:
    assert evaluate(PairView(F, F, edge(F, F), complete=EVERYWHERE)) == []


def test_membership_items_imply_their_order_items_in_both_tables() -> None:
    assert implied_orders({member_key(FOLLOWERS, G, it.EDGE, F): T}) == {
        order(FOLLOWERS, G, it.EDGE_ORDER, F, T),
        order(FOLLOWING, F, it.EDGE_ORDER, G, T),
    }
    assert implied_orders({member_key(FOLLOWERS, G, it.REQUEST, F): T}) == {order(FOLLOWERS, G, it.REQUEST_ORDER, F, T)}
    assert implied_orders({**block(F, G), order(FOLLOWERS, G, it.EDGE_ORDER, F, T): T}) == set()


def test_a_whole_scan_reads_only_what_each_partitions_items_need() -> None:
    follower = {k: v for k, v in edge().items() if k[:2] == (FOLLOWERS, G)}
    assert first_look_keys(FOLLOWERS, G, F, follower, scanning=True) == {
        member_key(FOLLOWING, F, it.EDGE, G),
        order(FOLLOWING, F, it.EDGE_ORDER, G, T),
        member_key(FOLLOWERS, F, it.BLOCK, G),
    }
    requested = {k: v for k, v in request().items() if k[:2] == (FOLLOWERS, G)}
    assert first_look_keys(FOLLOWERS, G, F, requested, scanning=True) == {
        member_key(FOLLOWING, F, it.REQUEST, G),  # its mirror
        member_key(FOLLOWERS, F, it.BLOCK, G),
    }
    assert first_look_keys(FOLLOWERS, G, F, block(G, F), scanning=True) == {
        member_key(FOLLOWERS, F, it.EDGE, G),
        member_key(FOLLOWERS, F, it.REQUEST, G),
        member_key(FOLLOWING, G, it.EDGE, F),
        member_key(FOLLOWING, F, it.EDGE, G),
    }
    followee = {k: v for k, v in edge().items() if k[:2] == (FOLLOWING, F)}
    assert first_look_keys(FOLLOWING, F, G, followee, scanning=True) == {
        member_key(FOLLOWERS, G, it.EDGE, F),
        order(FOLLOWERS, G, it.EDGE_ORDER, F, T),
    }
    lone_order = {order(FOLLOWERS, G, it.EDGE_ORDER, F, T): T}
    assert first_look_keys(FOLLOWERS, G, F, lone_order, scanning=True) == set()  # judged from the partition


def test_a_user_checked_alone_reads_every_item_of_the_pair_outside_its_partition() -> None:
    follower = {k: v for k, v in edge().items() if k[:2] == (FOLLOWERS, G)}
    assert first_look_keys(FOLLOWERS, G, F, follower, scanning=False) == {
        member_key(FOLLOWERS, F, it.EDGE, G),
        member_key(FOLLOWING, F, it.EDGE, G),
        member_key(FOLLOWING, G, it.EDGE, F),
        member_key(FOLLOWERS, F, it.REQUEST, G),
        member_key(FOLLOWERS, F, it.BLOCK, G),
        order(FOLLOWING, F, it.EDGE_ORDER, G, T),
    }


def test_sort_keys_are_parsed_and_the_owners_own_items_skipped() -> None:
    assert parse_sk(f"E#{F:020d}") == ("E#", F, None)
    assert parse_sk(f"T#{Edge(F, T).position}") == ("T#", F, T)
    assert parse_sk(f"RT#{Edge(F, T).position}") == ("RT#", F, T)
    assert parse_sk(f"R#{F:020d}") == ("R#", F, None)
    assert parse_sk(f"B#{F:020d}") == ("B#", F, None)
    assert parse_sk("P") is None
    assert parse_sk("O") is None
    assert parse_sk("E#junk") is None
    assert parse_sk("T#12") is None


def test_a_partitions_items_are_grouped_by_the_other_account() -> None:
    items: list[dict[str, Any]] = [
        {"pk": {"N": str(G)}, "sk": {"S": f"E#{F:020d}"}, "at": {"N": str(T)}},
        {"pk": {"N": str(G)}, "sk": {"S": f"T#{Edge(F, T).position}"}, "at": {"N": str(T)}},
        {"pk": {"N": str(G)}, "sk": {"S": f"B#{3:020d}"}, "at": {"N": "5"}},
        {"pk": {"N": str(G)}, "sk": {"S": "P"}, "private": {"BOOL": True}},
    ]
    grouped = pair_items(FOLLOWERS, G, items)
    assert set(grouped) == {F, 3}
    assert grouped[3] == {member_key(FOLLOWERS, G, it.BLOCK, 3): 5}
    assert len(grouped[F]) == 2


def test_a_request_and_its_mirror_must_both_be_there_at_the_same_time() -> None:
    mirror = member_key(FOLLOWING, F, it.REQUEST, G)
    assert kinds(without(request(), mirror)) == {("request_mirror_unpaired", G, F)}
    assert kinds({mirror: T}) == {("request_mirror_unpaired", F, G)}  # a mirror needs its request, no order item
    (violation,) = evaluate(PairView(F, G, request(at_mirror=T + 3), complete=EVERYWHERE))
    assert violation == Violation(
        "request_mirror_unpaired", G, F, f"followers pk={G} R#{F} at {T}, following pk={F} R#{G} at {T + 3}"
    )
    (violation,) = evaluate(PairView(F, G, {mirror: T}, complete=EVERYWHERE))
    assert violation.detail == f"following pk={F} R#{G} (at {T}) has no followers pk={G} R#{F}"
    assert kinds({**request(), **request(G, F, T + 1)}) == set()  # a request each way, each mirrored


def test_a_request_whose_mirror_was_not_read_is_not_judged() -> None:
    mirror = member_key(FOLLOWING, F, it.REQUEST, G)
    assert kinds(without(request(), mirror), complete=frozenset({(FOLLOWERS, G)})) == set()
    view = PairView(F, G, without(request(), mirror), looked=frozenset({mirror}), complete=frozenset({(FOLLOWERS, G)}))
    assert [v.kind for v in evaluate(view)] == ["request_mirror_unpaired"]


def test_a_requests_mirror_implies_no_order_item_and_each_half_names_the_other() -> None:
    request_key, mirror = member_key(FOLLOWERS, G, it.REQUEST, F), member_key(FOLLOWING, F, it.REQUEST, G)
    assert implied_orders({mirror: T}) == set()
    assert request_partners({request_key: T}) == {mirror}
    assert request_partners({mirror: T}) == {request_key}
    assert request_partners(edge()) == set()
    assert len(member_keys(F, G)) == 10
    assert set(member_keys(F, G)) - set(member_keys(F, G, mirrors=False)) == {
        mirror,
        member_key(FOLLOWING, G, it.REQUEST, F),
    }


def test_a_first_look_reads_a_mirror_only_beside_a_request() -> None:
    mirrored = {member_key(FOLLOWING, F, it.REQUEST, G): T}
    assert first_look_keys(FOLLOWING, F, G, mirrored, scanning=True) == {member_key(FOLLOWERS, G, it.REQUEST, F)}
    requested = {k: v for k, v in request().items() if k[:2] == (FOLLOWERS, G)}
    alone = first_look_keys(FOLLOWERS, G, F, requested, scanning=False)
    assert member_key(FOLLOWING, F, it.REQUEST, G) in alone
    assert member_key(FOLLOWING, G, it.REQUEST, F) not in alone  # G made no request: nothing names it
    assert first_look_keys(FOLLOWING, F, G, mirrored, scanning=False) == set(member_keys(F, G, mirrors=False)) - {
        member_key(FOLLOWING, F, it.EDGE, G)  # in the partition itself; and no RT# beside a mirror
    }
    follower = {k: v for k, v in edge().items() if k[:2] == (FOLLOWERS, G)}
    for scanning in (True, False):  # no request: no mirror read
        keys = first_look_keys(FOLLOWERS, G, F, follower, scanning=scanning)
        assert not {k for k in keys if k[0] == FOLLOWING and k[2].startswith(it.REQUEST)}
