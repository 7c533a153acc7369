"""fsck on the edge tables: each kind of violation, planted as raw items, is reported with its kind and user."""

from __future__ import annotations

import io
from collections import Counter
from dataclasses import dataclass, field

from graph_service.domain.models import Edge
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.operations import Item
from graph_service.dynamodb.tables import FOLLOWERS, FOLLOWING, USERS
from graph_service.entrypoints.fsck import run_fsck
from graph_service.operations.fsck import FsckPlan
from graph_service.operations.fsck_report import Report
from graph_service.settings import Settings
from graph_service.store import items as it
from tests.support.seeding import seed_follows

T0 = 1_764_000_000_000_000
Found = set[tuple[str, int, int | None]]


@dataclass
class Plant:
    """Raw items written straight into the tables, with users counters and following caps that agree
    with them (so that only the planted violations are violations)."""

    settings: Settings
    items: list[tuple[str, Item]] = field(default_factory=list)
    followers: Counter[int] = field(default_factory=Counter)
    following: Counter[int] = field(default_factory=Counter)
    made: Counter[int] = field(default_factory=Counter)

    def put(self, table: str, item: Item) -> None:
        self.items.append((self.settings.table(table), item))
        sk = item["sk"]["S"]
        owner = int(item["pk"]["N"])
        if sk.startswith(it.EDGE):
            (self.followers if table == FOLLOWERS else self.following)[owner] += 1
            if table == FOLLOWING:
                self.made[owner] += 1
        if sk.startswith(it.REQUEST) and not sk.startswith(it.REQUEST_ORDER):
            self.made[int(item["other"]["N"])] += 1

    def edge_half(self, table: str, owner: int, other: int, at: int, *, order: bool = True) -> None:
        self.put(table, it.item(it.key(it.EDGE, owner, other), Edge(other, at)))
        if order:
            self.put(table, it.item(it.order_key(it.EDGE_ORDER, owner, Edge(other, at)), Edge(other, at)))

    def follow(self, follower: int, followee: int, at: int) -> None:
        self.edge_half(FOLLOWERS, followee, follower, at)
        self.edge_half(FOLLOWING, follower, followee, at)

    def request(self, requester: int, user: int, at: int, *, order: bool = True) -> None:
        self.put(FOLLOWERS, it.item(it.key(it.REQUEST, user, requester), Edge(requester, at)))
        if order:
            self.put(FOLLOWERS, it.item(it.order_key(it.REQUEST_ORDER, user, Edge(requester, at)), Edge(requester, at)))

    def block(self, blocker: int, blocked: int, at: int) -> None:
        self.put(FOLLOWERS, it.item(it.key(it.BLOCK, blocker, blocked), Edge(blocked, at)))

    async def commit(
        self, *, counters: dict[int, tuple[int, int]] | None = None, made: dict[int, int] | None = None
    ) -> None:
        """Write the items, then counters and caps that agree with them (``counters``/``made``: planted drift)."""
        users = set(self.followers) | set(self.following)
        for user in users:
            fl, fg = (counters or {}).get(user, (self.followers[user], self.following[user]))
            self.items.append((self.settings.table(USERS), _counter(user, fl, fg)))
        for user in set(self.made) | set(made or {}):
            n = (made or {}).get(user, self.made[user])
            self.items.append((self.settings.table(FOLLOWING), {**it.outgoing_key(user), "n": {"N": str(n)}}))
        for user, (fl, fg) in (counters or {}).items():
            if user not in users:
                self.items.append((self.settings.table(USERS), _counter(user, fl, fg)))
        dynamo = AsyncDynamo.build(self.settings)
        try:
            for start in range(0, len(self.items), 25):  # BatchWriteItem's most
                request: dict[str, list[Item]] = {}
                for table, item in self.items[start : start + 25]:
                    request.setdefault(table, []).append({"PutRequest": {"Item": item}})
                while request:
                    request = (await dynamo.call("batch_write_item", RequestItems=request)).get("UnprocessedItems", {})
        finally:
            dynamo.close()


def _counter(user: int, followers: int, following: int) -> Item:
    return {
        "user_id": {"N": str(user)},
        "followers_count": {"N": str(followers)},
        "following_count": {"N": str(following)},
        "ver": {"N": "1"},
    }


async def fsck(settings: Settings, plan: FsckPlan) -> tuple[Report, str]:
    out = io.StringIO()
    report = await run_fsck(settings, plan, out=out)
    return report, out.getvalue()


def found(report: Report) -> Found:
    return {(v.kind, v.user, v.other) for v in report.violations}


async def plant_every_kind(settings: Settings) -> Found:
    """One violation of each store kind (some kinds twice, from either side), among users 100-121."""
    plant = Plant(settings)
    plant.edge_half(FOLLOWERS, 101, 100, T0)  # 100 -> 101 only in followers
    plant.edge_half(FOLLOWING, 102, 103, T0)  # 102 -> 103 only in following
    plant.edge_half(FOLLOWERS, 105, 104, T0)  # 104 -> 105 at two times
    plant.edge_half(FOLLOWING, 104, 105, T0 + 7)
    plant.edge_half(FOLLOWERS, 107, 106, T0, order=False)  # 106 -> 107 without its T# in followers
    plant.edge_half(FOLLOWING, 106, 107, T0)
    plant.put(FOLLOWING, it.item(it.order_key(it.EDGE_ORDER, 108, Edge(109, T0)), Edge(109, T0)))  # a lone T#
    plant.request(110, 111, T0, order=False)  # a request without its RT#
    plant.follow(112, 113, T0)  # an edge and a request in one direction
    plant.request(112, 113, T0 + 1)
    plant.block(115, 114, T0)  # 115 blocks 114, who follows 115
    plant.follow(114, 115, T0)
    plant.block(117, 116, T0)  # 117 blocks 116 and follows 116
    plant.follow(117, 116, T0)
    plant.follow(119, 120, T0)  # right counters, but 119's following cap count is 5
    plant.follow(121, 100, T0)  # 121's counters say 3 followers
    await plant.commit(counters={121: (3, 1), 118: (2, 0)}, made={119: 5})
    return {
        ("edge_one_sided", 101, 100),
        ("edge_one_sided", 102, 103),
        ("edge_time_mismatch", 105, 104),
        ("order_unpaired", 107, 106),
        ("order_unpaired", 108, 109),
        ("order_unpaired", 111, 110),
        ("edge_and_request", 113, 112),
        ("across_block", 115, 114),
        ("across_block", 117, 116),
        ("counter_drift", 121, None),
        ("counter_drift", 118, None),  # counters of a user without any partition
        ("outgoing_count", 119, None),
    }


async def test_every_planted_violation_is_reported_once_with_its_kind_and_user(settings: Settings) -> None:
    expected = await plant_every_kind(settings)

    report, out = await fsck(settings, FsckPlan(everything=True, segments=3, settle_seconds=0))

    assert found(report) == expected
    assert len(report.violations) == len(expected)
    lines = out.splitlines()
    one_sided = "followers pk=101 E#100 (at 1764000000000000) has no following pk=100 E#101"
    assert f"edge_one_sided user=101 other=100: {one_sided}" in lines
    assert "order_unpaired user=108 other=109: following pk=108 T#1764000000000000#109 has no E#109" in lines
    assert "outgoing_count user=119: following pk=119 O n=5; 1 follows + 0 pending requests" in lines
    assert lines[-1].startswith("fsck: 12 violations (across_block 2, counter_drift 2, edge_and_request 1,")

    report, _ = await fsck(settings, FsckPlan(users=(100, 104, 114, 116, 118, 119), settle_seconds=0))

    # Chosen users: 100's following partition is empty and names nothing of 101's one-sided item;
    # the others are seen from their own partitions or from the other side of a pair theirs names;
    # the following cap's count needs --all.
    assert found(report) == {
        ("edge_time_mismatch", 105, 104),
        ("across_block", 115, 114),
        ("across_block", 117, 116),
        ("counter_drift", 118, None),
    }


async def test_a_clean_seeded_pair_of_partitions_reports_nothing(settings: Settings) -> None:
    plant = Plant(settings)
    plant.follow(1, 2, T0)
    plant.follow(2, 1, T0 + 1)
    plant.request(3, 1, T0 + 2)
    plant.block(1, 4, T0 + 3)
    await plant.commit()

    report, out = await fsck(settings, FsckPlan(everything=True, settle_seconds=0))

    assert report.violations == []
    assert out.splitlines()[-1] == "fsck: no violation (5 partitions, 0 cache entries)"


async def test_a_sample_checks_that_many_distinct_users(settings: Settings) -> None:
    # A ring of 20 seeded follows: every user has one follower and one followee and, as seeded
    # items go uncounted, counters that drift; so each checked user is one counter_drift line.
    await seed_follows(settings, [(u, u % 20 + 1) for u in range(1, 21)])

    report, out = await fsck(settings, FsckPlan(sample=5, settle_seconds=0))

    assert {v.kind for v in report.violations} == {"counter_drift"}
    users = {v.user for v in report.violations}
    assert len(users) == 5
    assert users <= set(range(1, 21))
    assert out.splitlines()[-1] == "fsck: 5 violations (counter_drift 5) (5 users, 10 partitions, 0 cache entries)"
